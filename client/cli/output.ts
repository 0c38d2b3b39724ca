/** Terminal or JSON output, exit codes, and a progress line for long waits on a TTY. */
import {
  FencingConflictError,
  ForbiddenError,
  InvocationCancelledError,
  InvocationFailedError,
  NotFoundError,
  TimeoutError,
  UnauthorizedError,
  BadRequestError,
  UnavailableError,
} from '../errors.ts';

export const EXIT = Object.freeze({
  ok: 0,
  failed: 1,
  usage: 2,
  notFound: 3,
  timeout: 4,
  cancelled: 5,
  unauthorized: 6,
  conflict: 7,
  unavailable: 8,
});

export function exitCodeOf(e: unknown): number {
  if (e instanceof InvocationFailedError) return EXIT.failed;
  if (e instanceof InvocationCancelledError) return EXIT.cancelled;
  if (e instanceof NotFoundError) return EXIT.notFound;
  if (e instanceof TimeoutError) return EXIT.timeout;
  if (e instanceof UnauthorizedError || e instanceof ForbiddenError) return EXIT.unauthorized;
  if (e instanceof FencingConflictError) return EXIT.conflict;
  if (e instanceof BadRequestError) return EXIT.usage;
  if (e instanceof UnavailableError) return EXIT.unavailable;
  return EXIT.failed;
}

export interface Out {
  json: boolean;
  tty: boolean;
  /** A result: JSON line with --json, else a readable line. */
  print(value: unknown, human?: string): void;
  /** Text as it is, no line end added: a job's raw output (CHUNK frames) on stdout. */
  raw(text: string): void;
  /** A transient status line on stderr, TTY only. */
  status(line: string): void;
  clearStatus(): void;
}

export function output(json: boolean): Out {
  const tty = !!process.stderr.isTTY && !json;
  let shown = false;
  return {
    json,
    tty,
    print(value, human) {
      if (shown) this.clearStatus();
      process.stdout.write(
        json ? `${JSON.stringify(value)}\n` : `${human ?? (typeof value === 'string' ? value : JSON.stringify(value, null, 2))}\n`,
      );
    },
    raw(text) {
      if (shown) this.clearStatus();
      process.stdout.write(text);
    },
    status(line) {
      if (!tty) return;
      process.stderr.write(`\r\x1b[2K${line}`);
      shown = true;
    },
    clearStatus() {
      if (tty && shown) process.stderr.write('\r\x1b[2K');
      shown = false;
    },
  };
}

export const elapsed = (t0: number) => `${((Date.now() - t0) / 1000).toFixed(1)}s`;
