/**
 * A worker process for the crash tests: runs runWorker against the edge plane and records every
 * handler start and every ack's answer to its own JSONL history (see history.ts).
 *   node crash-worker.ts <url> <token> <ns> <queue> <history.jsonl> <jobMs> <leaseMs> <concurrency>
 */
import { work } from '../support/wait.ts';
import { currentJob, HttpDispatch, runWorker } from '../../client/local/index.ts';
import { recorder } from './history.ts';

const [url, token, ns, queue, file, jobMs, leaseMs, concurrency] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
  string,
  string,
  string,
];
const record = recorder(file);
const d = new HttpDispatch(url, { token, namespace: ns, retryForMs: 60_000 });
const stop = new AbortController();
process.on('SIGTERM', () => stop.abort());
await runWorker(queue, {
  dispatch: d,
  workerId: `crash-${process.pid}`,
  concurrency: Number(concurrency),
  prefetch: process.env.CRASH_PREFETCH === undefined ? 'auto' : Number(process.env.CRASH_PREFETCH),
  leaseMs: Number(leaseMs),
  claimWaitMs: 2_000,
  graceMs: 2_000,
  stop: stop.signal,
  log: process.env.CRASH_DEBUG ? (m) => console.error(`[w${process.pid}] ${m}`) : () => {},
  registry: {
    job: async () => {
      const j = currentJob()!;
      record({ op: 'start', id: j.id, attempt: j.attempt, pid: process.pid });
      if (Number(jobMs)) await work(Number(jobMs));
      return j.id;
    },
  },
  onJob: (id, outcome, attempt) => record({ op: 'ack', phase: outcome === 'succeeded' ? 'ok' : 'fail', id, attempt, pid: process.pid }),
});
await d.close();
process.exit(0);
