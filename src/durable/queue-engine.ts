/**
 * The engine a queue object runs its queue's transitions on: the one writer of its queue's rows
 * (single writer), group-committing to its shard's D1 with a second batch on its way while the
 * first is (D1 is a round trip away: committer.ts), counting what its batches read and wrote.
 */
import { Engine } from '../core/engine.ts';
import type { D1Port } from './d1-port.ts';
import type { Settings } from './settings.ts';

/**
 * What a queue object's batches read and wrote, its calls, and the claims that reached it, for
 * benchmarks and tests (QueueObject.stats).
 */
export type BatchCounters = {
  read: number;
  written: number;
  batches: number;
  plans: number;
  calls: number;
  callMs: number;
  claims: number;
};

export function queueEngine(
  port: D1Port,
  settings: Settings,
  rows: BatchCounters,
  hooks: { onWake: (at: number) => void; onFailed: () => void },
): Engine {
  return new Engine(port, {
    limits: settings.limits,
    committer: {
      depth: 2,
      simulatedDelayMs: settings.simulatedDelayMs,
      onBatch: (results, plans) => {
        for (const r of results) {
          rows.read += r.rowsRead;
          rows.written += r.rowsWritten;
        }
        rows.batches++;
        rows.plans += plans;
      },
    },
    onWake: (_ns, _queue, at) => hooks.onWake(at),
    singleWriter: true,
    storage: settings.storage,
    pushHosts: settings.pushHosts,
    pushServices: settings.pushServices,
    onFailed: hooks.onFailed,
  });
}
