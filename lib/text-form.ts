/**
 * Text forms shared by every writer and reader of catalog rows: COPY text values and the UTC text
 * of a timestamptz column (the form sources produce). One definition each; pure.
 */

/** A value in COPY text format (`\N` for NULL; backslash, newline, carriage return and tab escaped). */
export function copyValue(v: string | null): string {
  if (v === null) return '\\N';
  return /[\\\n\r\t]/.test(v)
    ? v.replace(/[\\\n\r\t]/g, (c) => (c === '\\' ? '\\\\' : c === '\n' ? '\\n' : c === '\r' ? '\\r' : '\\t'))
    : v;
}

/** SQL: the text form of timestamptz column `col` as a UTC instant, `YYYY-MM-DDTHH:MI:SS.USZ`. */
export const utcText = (col: string): string => `to_char(${col} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
