/** The processes a test started, read from /proc: what runs below one, and whether one still runs. */
import { existsSync, readdirSync, readFileSync } from 'node:fs';

/** Every live process descended from `pid`, with its command line. */
export function descendants(pid: number): { pid: number; cmd: string }[] {
  const parent = new Map<number, number>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] !== 'Z') parent.set(Number(d), Number(fields[1]));
    } catch {
      /* it ended meanwhile */
    }
  }
  const out: { pid: number; cmd: string }[] = [];
  const walk = (p: number) => {
    for (const [c, pp] of parent) {
      if (pp !== p) continue;
      let cmd = '';
      try {
        cmd = readFileSync(`/proc/${c}/cmdline`, 'utf8').replaceAll('\0', ' ');
      } catch {
        continue;
      }
      out.push({ pid: c, cmd });
      walk(c);
    }
  };
  walk(pid);
  return out;
}

/** The process runs (a zombie, ended but not yet reaped by its new parent, does not). */
export function alive(pid: number): boolean {
  if (!existsSync(`/proc/${pid}`)) return false;
  try {
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');
  } catch {
    return false;
  }
}

/** None of `pids` runs any more. */
export const allExited = (pids: number[]): boolean => pids.every((p) => !alive(p));

/** SIGKILLs a process group this test started, if any of it is left (a test's cleanup). */
export function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    /* already gone */
  }
}
