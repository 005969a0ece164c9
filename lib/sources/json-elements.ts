/**
 * A top-level JSON array split into its elements' text, so a listing of many records is parsed one
 * element at a time (memory holds one parsed record, not the whole document as objects).
 */

/**
 * The elements of a top-level JSON array as text slices, found by tracking strings and nesting
 * (each slice is then parsed on its own). Null when the text is not a well-formed array at the top
 * level: the caller parses the whole text, which reports the precise error.
 * @returns per element: its 0-based `index`, the character offset of its `start` in `text`, and
 *   its `text` (surrounding whitespace included).
 */
export function arrayElements(text: string): { index: number; start: number; text: string }[] | null {
  const ws = (c: number) => c === 32 || c === 10 || c === 13 || c === 9;
  let i = 0;
  while (i < text.length && ws(text.charCodeAt(i))) i++;
  if (text.charCodeAt(i) !== 91 /* [ */) return null;
  i++;
  const out: { index: number; start: number; text: string }[] = [];
  let j = i;
  while (j < text.length && ws(text.charCodeAt(j))) j++;
  if (text.charCodeAt(j) === 93 /* ] */) {
    i = j + 1;
  } else {
    for (;;) {
      const start = i;
      let depth = 0;
      for (; i < text.length; i++) {
        const c = text.charCodeAt(i);
        if (c === 34 /* " */) {
          for (i++; i < text.length && text.charCodeAt(i) !== 34; i++) if (text.charCodeAt(i) === 92 /* \\ */) i++;
        } else if (c === 123 || c === 91) depth++;
        else if (c === 125 || c === 93) {
          if (depth === 0) break;
          depth--;
        } else if (c === 44 /* , */ && depth === 0) break;
      }
      const end = text.charCodeAt(i);
      if (i >= text.length || (end !== 44 && end !== 93)) return null;
      out.push({ index: out.length, start, text: text.slice(start, i) });
      i++;
      if (end === 93) break;
    }
  }
  while (i < text.length && ws(text.charCodeAt(i))) i++;
  return i === text.length ? out : null;
}
