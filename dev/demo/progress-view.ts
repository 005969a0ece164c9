/**
 * The demo's progress output: a cli-progress bar on a terminal, a compact line every 2 s otherwise.
 * Nothing is cut at the terminal's edge: line wrapping stays on (cli-progress would send `ESC[?7l`),
 * the bar's text is sized to the terminal's width and announcements are wrapped at spaces.
 */
import { MultiBar, Presets } from 'cli-progress';
import type { RebuildProgress } from '../../client';
import { terminalWidth, wrapLine } from './lines';

/** Where the view writes: a stream with the terminal's shape (process.stdout by default). */
export interface ViewStream extends NodeJS.WritableStream {
  isTTY?: boolean;
  columns?: number;
}

/** Columns of the bar itself. */
const BAR_SIZE = 16;
/** Indentation before the bar. */
const INDENT = '    ';

/**
 * The text after the bar (pure): as much of pages, phase, retries, checkpoint, rate and note (in that
 * order of importance) as fits `room` columns.
 */
export function barText(p: RebuildProgress, note: string, room: number): string {
  const parts = [
    `${p.pagesDone}/${p.pagesTotal} pages`,
    `${p.phase}${p.paused ? ' (paused)' : ''}`,
    `${p.retries} retries`,
    `checkpoint ${p.checkpoint}`,
    `${p.rowsPerSecond} rows/s`,
    ...(note ? [note] : []),
  ];
  let text = parts[0];
  for (const part of parts.slice(1)) {
    if (text.length + 3 + part.length > room) break;
    text += ` · ${part}`;
  }
  return text.length > room ? text.slice(0, room) : text;
}

/** Progress output: a cli-progress bar on a terminal, compact lines otherwise. */
export class ProgressView {
  private readonly out: ViewStream;
  private readonly tty: boolean;
  private multi: MultiBar | null = null;
  private bar: ReturnType<MultiBar['create']> | null = null;
  private lastLine = 0;
  private last: RebuildProgress | null = null;

  constructor(out: ViewStream = process.stdout) {
    this.out = out;
    this.tty = !!out.isTTY;
  }

  private width(): number {
    return terminalWidth(this.out);
  }

  private print(line: string): void {
    for (const l of wrapLine(line, this.width())) this.out.write(`${l}\n`);
  }

  /** Shows the latest `progress` answer (null: no worker answered) with an optional note. */
  update(answer: RebuildProgress | null, note: string): void {
    if (answer) this.last = answer;
    const p = this.tty ? this.last : answer;
    if (this.tty) {
      if (!p || !p.pagesTotal) return;
      const text = barText(p, note, this.width() - INDENT.length - BAR_SIZE - 2);
      if (!this.multi) {
        this.multi = new MultiBar(
          {
            format: `${INDENT}{bar} {text}`,
            hideCursor: true,
            clearOnComplete: false,
            barsize: BAR_SIZE,
            linewrap: true,
            stream: this.out,
          },
          Presets.shades_classic,
        );
        this.bar = this.multi.create(p.pagesTotal, p.pagesDone, { text });
      }
      this.bar!.setTotal(p.pagesTotal);
      this.bar!.update(p.pagesDone, { text });
      return;
    }
    if (Date.now() - this.lastLine < 2_000) return;
    this.lastLine = Date.now();
    if (!p) this.print(`${INDENT}progress: no answer${note ? ` · ${note}` : ''}`);
    else this.print(`${INDENT}progress: ${barText(p, note, Number.MAX_SAFE_INTEGER)}`);
  }

  /** Prints an announcement above the bar, wrapped to the terminal's width. */
  announce(s: string): void {
    const lines = wrapLine(`==> ${s}`, this.width());
    if (this.multi) this.multi.log(`${lines.join('\n')}\n`);
    else for (const l of lines) this.out.write(`${l}\n`);
  }

  /** Ends the bar (the terminal keeps its last state); announcements not drawn yet are printed first. */
  stop(): void {
    this.multi?.update();
    this.multi?.stop();
    this.multi = null;
  }
}
