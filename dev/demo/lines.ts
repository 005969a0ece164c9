/**
 * The demo's lines on a terminal: every line it prints fits the terminal's width (80 columns when
 * unknown) or is broken at spaces into continuation lines, so nothing is cut at the edge.
 */

/** Width the demo's lines are wrapped to: the terminal's columns, else 80. */
export function terminalWidth(stream: { columns?: number; isTTY?: boolean } = process.stdout): number {
  return stream.isTTY && stream.columns && stream.columns >= 40 ? stream.columns : 80;
}

/**
 * `line` broken at spaces into lines of at most `width` columns (pure). Continuation lines are
 * indented 4 columns deeper than the line's own indentation (after a `==> ` prefix, as deep as its
 * text). A single word longer than the room stays whole on its own line (the terminal wraps it).
 */
export function wrapLine(line: string, width = 80): string[] {
  if (line.length <= width) return [line];
  const lead = /^(\s*(?:==> )?)/.exec(line)![1];
  const hang = ' '.repeat(lead.length + (lead.includes('==>') ? 0 : 4));
  const words = line.slice(lead.length).split(' ');
  const out: string[] = [];
  let cur = lead;
  let empty = true;
  for (const word of words) {
    const candidate = empty ? cur + word : `${cur} ${word}`;
    if (!empty && candidate.length > width) {
      out.push(cur.trimEnd()); // no trailing blanks from a run of spaces before the break
      cur = hang + word;
    } else cur = candidate;
    empty = false;
  }
  out.push(cur);
  return out;
}

/** Prints `line` wrapped to the terminal's width on stdout. */
export function say(line: string): void {
  for (const l of wrapLine(line, terminalWidth())) console.log(l);
}
