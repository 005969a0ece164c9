/** The demo's progress output: a cli-progress bar on a terminal, a compact line every 2 s otherwise. */
import { MultiBar, Presets } from 'cli-progress';
import type { RebuildProgress } from '../../client';

const step = (s: string): void => console.log(`==> ${s}`);
const info = (s: string): void => console.log(`    ${s}`);

/** Progress output: a cli-progress bar on a terminal, compact lines otherwise. */
export class ProgressView {
  private readonly tty = !!process.stdout.isTTY;
  private multi: MultiBar | null = null;
  private bar: ReturnType<MultiBar['create']> | null = null;
  private lastLine = 0;
  private last: RebuildProgress | null = null;

  /** Shows the latest `progress` answer (null: no worker answered) with an optional note. */
  update(answer: RebuildProgress | null, note: string): void {
    if (answer) this.last = answer;
    const p = this.tty ? this.last : answer;
    const payload = {
      phase: p ? `${p.phase}${p.paused ? ' (paused)' : ''}` : '?',
      rps: p ? p.rowsPerSecond : 0,
      retries: p ? p.retries : 0,
      checkpoint: p ? p.checkpoint : 0,
      note: note ? ` · ${note}` : '',
    };
    if (this.tty) {
      if (!p || !p.pagesTotal) return;
      if (!this.multi) {
        this.multi = new MultiBar(
          {
            format:
              '    {bar} {value}/{total} pages · {phase} · checkpoint {checkpoint} · {rps} rows/s · {retries} retries{note}',
            hideCursor: true,
            clearOnComplete: false,
            barsize: 30,
          },
          Presets.shades_classic,
        );
        this.bar = this.multi.create(p.pagesTotal, p.pagesDone, payload);
      }
      this.bar!.setTotal(p.pagesTotal);
      this.bar!.update(p.pagesDone, payload);
      return;
    }
    if (Date.now() - this.lastLine < 2_000) return;
    this.lastLine = Date.now();
    if (!p) info(`progress: no answer${payload.note}`);
    else
      info(
        `progress: ${p.pagesDone}/${p.pagesTotal} pages · ${payload.phase} · checkpoint ${p.checkpoint} · ${p.rowsPerSecond} rows/s · ${p.retries} retries${payload.note}`,
      );
  }

  /** Prints an announcement above the bar. */
  announce(s: string): void {
    if (this.multi) this.multi.log(`==> ${s}\n`);
    else step(s);
  }

  /** Ends the bar (the terminal keeps its last state). */
  stop(): void {
    this.multi?.stop();
    this.multi = null;
  }
}
