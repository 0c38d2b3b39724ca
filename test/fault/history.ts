/**
 * A run's history, one JSON line per client operation, and a checker in the manner of Jepsen's
 * queue checker. Every process of a fault run appends to its own JSONL file:
 *
 *   {t, op: 'submit', phase: 'invoke' | 'ok' | 'fail', id}      producer
 *   {t, op: 'start', id, attempt, pid}                           worker, first statement of the handler
 *   {t, op: 'ack', phase: 'ok' | 'fail', id, attempt, pid}       worker, after its ack was answered
 *
 * The checker reads them all, with the store's final state of every id, and reports:
 * lost (acknowledged submits that never succeeded), duplicated (ids whose success was accepted
 * for two different attempts), unexpected (deliveries of ids never submitted), recovered
 * (submits whose answer failed but that succeeded anyway), the fraction of attempted submits
 * that succeeded, and redelivery delays (a start after an attempt that never got its ack in).
 */
import { appendFileSync, readFileSync } from 'node:fs';

export type Event =
  | { t: number; op: 'submit'; phase: 'invoke' | 'ok' | 'fail'; id: string }
  | { t: number; op: 'start'; id: string; attempt: number; pid: number }
  | { t: number; op: 'ack'; phase: 'ok' | 'fail'; id: string; attempt: number; pid: number };

type Omit2<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never;

export function recorder(file: string) {
  return (e: Omit2<Event, 't'>) => appendFileSync(file, `${JSON.stringify({ t: Date.now(), ...e })}\n`);
}

export const readHistory = (files: string[]): Event[] =>
  files
    .flatMap((f) =>
      readFileSync(f, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Event),
    )
    .sort((a, b) => a.t - b.t);

export interface Verdict {
  attempted: number;
  acknowledged: number;
  succeeded: number;
  lost: number;
  duplicated: number;
  unexpected: number;
  recovered: number;
  ok_fraction: number;
  deliveries: number;
  redelivered: number;
  redelivery_ms: { max: number | null; p99: number | null };
  lost_ids: string[];
}

/** `succeeded`: the ids the store says succeeded at the end of the run. */
export function check(history: Event[], succeeded: Set<string>): Verdict {
  const invoked = new Set<string>();
  const acked = new Set<string>();
  const failed = new Set<string>();
  const starts = new Map<string, { t: number; attempt: number }[]>();
  const okAttempts = new Map<string, Set<number>>();
  for (const e of history) {
    if (e.op === 'submit') {
      if (e.phase === 'invoke') invoked.add(e.id);
      else if (e.phase === 'ok') acked.add(e.id);
      else failed.add(e.id);
    } else if (e.op === 'start') {
      let l = starts.get(e.id);
      if (!l) starts.set(e.id, (l = []));
      l.push({ t: e.t, attempt: e.attempt });
    } else if (e.phase === 'ok') {
      let s = okAttempts.get(e.id);
      if (!s) okAttempts.set(e.id, (s = new Set()));
      s.add(e.attempt);
    }
  }
  const lostIds = [...acked].filter((id) => !succeeded.has(id));
  const delays: number[] = [];
  for (const l of starts.values()) for (let i = 1; i < l.length; i++) delays.push(l[i]!.t - l[i - 1]!.t);
  delays.sort((a, b) => a - b);
  return {
    attempted: invoked.size,
    acknowledged: acked.size,
    succeeded: [...invoked].filter((id) => succeeded.has(id)).length,
    lost: lostIds.length,
    duplicated: [...okAttempts.values()].filter((s) => s.size > 1).length,
    unexpected: [...starts.keys()].filter((id) => !invoked.has(id)).length,
    recovered: [...failed].filter((id) => !acked.has(id) && succeeded.has(id)).length,
    ok_fraction: invoked.size ? +([...invoked].filter((id) => succeeded.has(id)).length / invoked.size).toFixed(4) : 1,
    deliveries: [...starts.values()].reduce((n, l) => n + l.length, 0),
    redelivered: delays.length,
    redelivery_ms: {
      max: delays.length ? delays[delays.length - 1]! : null,
      p99: delays.length ? delays[Math.min(delays.length - 1, Math.ceil(0.99 * delays.length) - 1)]! : null,
    },
    lost_ids: lostIds.slice(0, 20),
  };
}
