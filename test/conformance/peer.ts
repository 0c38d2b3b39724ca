/**
 * The second process of the two-process plane: it opens the same SQLite file and runs the worker
 * verbs it is sent over IPC, answering results or errors.
 */
import { Dispatch } from '../../client/local/dispatch.ts';
import { LakeshoreError } from '../../client/errors.ts';

const [path, namespace] = process.argv.slice(2);
/** The plane's clock, moved by the test (`advance`) in step with the other process's. */
let offset = 0;
const d = new Dispatch(path!, { namespace, now: () => Date.now() + offset });

type Call = { n: number; method: string; args: unknown[] };
const methods: Record<string, (...a: any[]) => Promise<unknown>> = {
  claim: (...a) => d.claim(a[0], a[1], a[2]),
  claimMany: (...a) => d.claimMany(a[0], a[1], a[2], a[3]),
  ack: (...a) => d.ack(a[0], a[1], a[2]),
  nack: (...a) => d.nack(a[0], a[1], a[2]),
  heartbeat: (...a) => d.heartbeat(a[0], a[1], a[2]),
  journalAppend: (...a) => d.journalAppend(a[0], a[1], a[2], a[3]),
  // The workers this process heard from (its claims are the worker's).
  workers: () => d.workers(),
  workerStopped: (...a) => d.workerStopped(a[0], a[1]),
  // The rows are the file's; `recent` counts this process's transitions.
  overview: (...a) => d.overview(a[0]),
};

process.on('message', async (m: Call | { close: true } | { n: number; advance: number } | { n: number; parked: true }) => {
  if ('close' in m) {
    await d.close();
    process.exit(0);
  }
  if ('advance' in m) {
    offset += m.advance;
    return process.send!({ n: m.n, ok: true, value: null });
  }
  if ('parked' in m) return process.send!({ n: m.n, ok: true, value: d.parked });
  try {
    const value = await methods[m.method]!(...m.args);
    process.send!({ n: m.n, ok: true, value });
  } catch (e) {
    const err = e as Error;
    process.send!({ n: m.n, ok: false, name: err.name, code: e instanceof LakeshoreError ? e.code : 'internal', message: err.message });
  }
});
process.send!({ ready: true });
