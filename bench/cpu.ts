/**
 * CPU time of processes, from /proc (Linux): what the benchmarks report beside jobs/s, since on
 * these machines it moves far less from run to run.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** USER_HZ: the unit of /proc/<pid>/stat's times; 100 on Linux. */
const HZ = 100;

/** Own CPU time (ms, user + system) of every process now, with its parent. */
function table(): Map<number, { ppid: number; ms: number }> {
  const out = new Map<number, { ppid: number; ms: number }>();
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const st = readFileSync(`/proc/${e}/stat`, 'utf8');
      const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
      out.set(Number(e), { ppid: Number(f[1]), ms: ((Number(f[11]) + Number(f[12])) * 1000) / HZ });
    } catch {
      /* exited meanwhile */
    }
  }
  return out;
}

/**
 * CPU time (ms) of a process and all its descendants so far: the edge plane is serve.mjs plus its
 * workerd. Null where /proc is not there.
 */
export function treeCpuMs(root: number): number | null {
  let stats: Map<number, { ppid: number; ms: number }>;
  try {
    stats = table();
  } catch {
    return null;
  }
  let ms = 0;
  const todo = [root];
  while (todo.length) {
    const pid = todo.pop()!;
    ms += stats.get(pid)?.ms ?? 0;
    for (const [c, v] of stats) if (v.ppid === pid) todo.push(c);
  }
  return ms;
}

/** A process.cpuUsage() reading (µs) in ms, user + system. */
export const cpuMs = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1000;
