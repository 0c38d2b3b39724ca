/**
 * The fourth target: the Python local plane (client/python/lakeshore/local.py), a separate python3
 * process on a SQLite file, driven through client/python/tests/bridge.py (JSON lines). Each verb
 * of the TypeScript interface becomes the Python verb of the contract with the same meaning (ms
 * to seconds, camelCase to snake_case); answers and errors come back as the same values and classes.
 *
 * What the Python plane does not have yet is listed in PYTHON_LACKS: those parts of the suite are
 * skipped on this target, by name, and nothing else is.
 */
import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import {
  Dispatch,
  errorFor,
  startPushing,
  InvocationCancelledError,
  InvocationFailedError,
  type Claimed,
  type DispatchPlane,
  type Ended,
  type FeedItem,
  type Invocation,
  type InvocationSummary,
  type QueueInfo,
  type QueueOverview,
  type JournalFrame,
  type JournalPage,
  type Schedule,
  type State,
} from '../../client/local/index.ts';
import { tempDir } from '../support/tmp.ts';
import { until } from '../support/wait.ts';
import { PYTHON } from '../support/python.ts';
import type { PlaneFactory, PlaneHandle, StoragePlaneFactory } from './planes.ts';
import { pushingOf } from '../../client/http/wire.ts';

/** What the Python local plane lacks, by the suite's feature names (docs/contract.md, "The Python local plane"). */
export const PYTHON_LACKS: ReadonlySet<string> = new Set([]);

type Json = any;
const b64 = (b: Uint8Array) => ({ $b: Buffer.from(b).toString('base64') });
const unb64 = (v: Json): Uint8Array => new Uint8Array(Buffer.from(v.$b, 'base64'));
const s = (ms: number | undefined | null) => (ms === undefined || ms === null ? undefined : ms / 1000);

let n = 0;
let calls = 0;
const freshNs = () => `py${process.pid}x${Date.now().toString(36)}${(n++).toString(36)}`;

const claimedOf = (c: Json): Claimed => ({
  id: c.id,
  queue: c.queue,
  envelope: unb64(c.envelope),
  attempt: c.attempt,
  budgetAttempt: c.budget_attempt,
  leaseUntil: c.lease_until,
  priority: c.priority,
});
/**
 * A streamed bridge call (journal_read, events) as an async iterator: the items its lines bring,
 * then its end or its error. `stop(n)` asks the bridge to end call n when `signal` aborts.
 */
function streamed<T>(
  start: (push: (item: T) => void, named: (n: number) => void) => Promise<unknown>,
  signal?: AbortSignal,
  stop?: (n: number) => void,
): AsyncIterable<T> {
  const items: T[] = [];
  let wake: (() => void) | null = null;
  let end = null as { error?: Error } | null;
  let n = 0;
  start(
    (item) => {
      items.push(item);
      wake?.();
    },
    (id) => (n = id),
  )
    .then(
      () => (end = {}),
      (e: Error) => (end = { error: e }),
    )
    .finally(() => wake?.());
  if (stop) signal?.addEventListener('abort', () => stop(n), { once: true });
  return (async function* () {
    for (;;) {
      while (items.length) yield items.shift()!;
      if (end || signal?.aborted) {
        if (end?.error) throw end.error;
        return;
      }
      await new Promise<void>((r) => (wake = r));
    }
  })();
}

const queueInfoOf = (q: Json): QueueInfo => {
  const t = q.settings;
  const b = t.retry_backoff;
  return {
    queue: q.queue,
    paused: q.paused,
    settings: {
      leaseMs: t.lease_ms,
      maxAttempts: t.max_attempts,
      maxRunning: t.max_running,
      claimsPerSecond: t.claims_per_second,
      retryBackoff: b && { initialMs: b.initial_ms, factor: b.factor, maxMs: b.max_ms, jitter: b.jitter },
      deadLetterQueue: t.dead_letter_queue,
      ttlMs: t.ttl_ms,
      retentionMs: t.retention_ms,
      journalRetentionMs: t.journal_retention_ms,
      timeLimitMs: t.time_limit_ms,
      push: t.push && {
        url: t.push.url,
        concurrency: t.push.concurrency,
        timeoutMs: t.push.timeout_ms,
        batchSize: t.push.batch_size,
        ...(t.push.secret ? { secret: t.push.secret } : {}),
      },
    },
  };
};

const overviewOf = (o: Json): QueueOverview => ({
  ...queueInfoOf(o),
  counts: o.counts,
  capped: o.capped,
  oldestQueuedMs: o.oldest_queued_ms,
  recent: { bucketMs: o.recent.bucket_ms, until: o.recent.until, succeeded: o.recent.succeeded, failed: o.recent.failed },
  pushing: pushingOf(o.pushing, o.settings.push),
});
const invocationOf = (r: Json): Invocation => ({
  id: r.id,
  namespace: r.namespace,
  queue: r.queue,
  key: r.key,
  priority: r.priority,
  parent: r.parent,
  envelope: unb64(r.envelope),
  state: r.state as State,
  attempt: r.attempt,
  workerId: r.worker_id,
  leaseUntil: r.lease_until,
  result: r.result ? unb64(r.result) : null,
  error: r.error,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  startedAt: r.started_at,
  finishedAt: r.finished_at,
  runAt: r.run_at,
  expiresAt: r.expires_at,
  maxAttempts: r.max_attempts,
});
/** A row as a listing gives it: no envelope or result. */
const summaryOf = (r: Json): InvocationSummary => {
  const { envelope: _e, result: _r, ...rest } = invocationOf({ ...r, envelope: b64(new Uint8Array()), result: null });
  return rest;
};
const scheduleOf = (r: Json): Schedule => ({
  queue: r.queue,
  name: r.name,
  cron: r.cron,
  timezone: r.timezone,
  envelope: unb64(r.envelope),
  priority: r.priority,
  nextAt: r.next_at,
  lastAt: r.last_at,
});
const frameOf = (f: Json): JournalFrame => ({
  seq: f.seq,
  kind: f.kind,
  body: unb64(f.body),
  meta: f.meta,
  attempt: f.attempt,
  final: f.final,
});

export const pythonPlane: PlaneFactory = () => pythonPlaneWith({});
export const pythonStoragePlane: StoragePlaneFactory = (limitBytes, highWaterPercent) =>
  pythonPlaneWith({ storage_limit_bytes: limitBytes, storage_high_water_percent: highWaterPercent });

/** The Python local plane behind the bridge; `options` are the Dispatch's keyword arguments. */
async function pythonPlaneWith(options: Record<string, unknown>): Promise<PlaneHandle> {
  const dir = tempDir('lakeshore-pyconf-');
  const namespace = freshNs();
  const root = resolve(import.meta.dirname, '..', '..', 'client', 'python');
  const child = spawn(PYTHON, [join(root, 'tests', 'bridge.py'), join(dir, 'dispatch.sqlite'), namespace, JSON.stringify(options)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let offset = 0;
  const pending = new Map<number, { ok: (v: Json) => void; fail: (e: Error) => void; frame?: (f: Json) => void }>();
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const m = JSON.parse(line);
    const p = pending.get(m.n);
    if (!p) return;
    if (m.frame) return p.frame?.(m.frame);
    pending.delete(m.n);
    if (m.ok) return p.ok(m.v);
    if (m.code === 'invocation_failed')
      return p.fail(new InvocationFailedError(String(m.message).match(/invocation (\S+)/)?.[1] ?? '', m.error));
    if (m.code === 'invocation_cancelled')
      return p.fail(new InvocationCancelledError(String(m.message).match(/invocation (\S+)/)?.[1] ?? ''));
    p.fail(errorFor(m.code, m.message));
  });
  const call = (m: string, a: Json[] = [], k: Json = {}, frame?: (f: Json) => void, named?: (id: number) => void) =>
    new Promise<Json>((ok, fail) => {
      const id = ++calls;
      named?.(id);
      pending.set(id, { ok, fail, frame });
      // JSON has no NaN or Infinity: they travel as {"$f": "NaN"}, so the Python plane sees what the caller passed.
      child.stdin!.write(
        `${JSON.stringify({ n: id, m, a, k }, (_key, v) => (typeof v === 'number' && !Number.isFinite(v) ? { $f: String(v) } : v))}\n`,
      );
    });
  const unsupported = (verb: string) => () => Promise.reject(new Error(`${verb} is not on the Python local plane yet (PYTHON_LACKS)`));

  const verbs: Partial<DispatchPlane> & Record<string, unknown> = {
    namespace,
    inProcess: true,
    submit: (queue, envelope, o) =>
      call('submit', [queue, b64(envelope)], {
        id: o.id,
        key: o.key ?? null,
        priority: o.priority ?? 0,
        parent: o.parent ?? null,
        delay: s(o.delayMs),
        run_at: s(o.runAt),
        ttl: s(o.ttlMs),
        expires_at: s(o.expiresAt),
        max_attempts: o.maxAttempts ?? null,
      }),
    submitMany: async (queue, items) =>
      (
        await call('submit_many', [
          queue,
          items.map(({ envelope, opts: o }) => ({
            envelope: b64(envelope),
            id: o.id,
            key: o.key ?? null,
            priority: o.priority ?? 0,
            parent: o.parent ?? null,
            delay: s(o.delayMs),
            run_at: s(o.runAt),
            ttl: s(o.ttlMs),
            expires_at: s(o.expiresAt),
            max_attempts: o.maxAttempts ?? null,
          })),
        ])
      ).map((r: Json) => (typeof r === 'string' ? { id: r } : { error: errorFor(r.$error, r.message) })),
    claim: async (queue, workerId, o = {}) => {
      const c = await call('claim', [queue, workerId], {
        kind: o.kind ?? 'fifo',
        temperature: o.temperature ?? 1,
        wait: s(o.waitMs) ?? 0,
        lease: s(o.leaseMs),
        worker: o.worker ?? null,
      });
      return c ? claimedOf(c) : null;
    },
    claimMany: async (queue, workerId, max, o = {}) =>
      (
        await call('claim_many', [queue, workerId, max], {
          kind: o.kind ?? 'fifo',
          temperature: o.temperature ?? 1,
          wait: s(o.waitMs) ?? 0,
          lease: s(o.leaseMs),
          worker: o.worker ?? null,
        })
      ).map(claimedOf),
    release: async (queue, workerId, items) =>
      (await call('release', [
        queue,
        workerId,
        items.map((it) => (it.attempt === undefined ? { id: it.id } : { id: it.id, attempt: it.attempt })),
      ])) as string[],
    ackAndClaim: async (queue, workerId, acks, max, o = {}) => {
      const [answers, claimed] = await call(
        'ack_and_claim',
        [queue, workerId, acks.map((a) => ({ id: a.id, attempt: a.attempt ?? null, result: a.result ? b64(a.result) : null })), max],
        {
          kind: o.kind ?? 'fifo',
          wait: s(o.waitMs) ?? 0,
          lease: s(o.leaseMs),
        },
      );
      return { acks: answers.map((e: Json) => (e === null ? null : errorFor(e.$error, e.message))), claimed: claimed.map(claimedOf) };
    },
    ack: async (id, workerId, o = {}) =>
      void (await call('ack', [id, workerId], { result: o.result ? b64(o.result) : null, attempt: o.attempt ?? null })),
    nack: (id, workerId, o) =>
      call('nack', [id, workerId], {
        error: o.error,
        retry: o.retry ?? true,
        delay: s(o.delayMs),
        attempt: o.attempt ?? null,
        max_attempts: o.maxAttempts ?? null,
      }),
    heartbeat: async (id, workerId, o = {}) => {
      const [leaseUntil, cancelled] = await call('heartbeat_lease', [id, workerId], { lease: s(o.leaseMs), attempt: o.attempt ?? null });
      return { leaseUntil, cancelled };
    },
    cancel: (id) => call('cancel', [id]),
    get: async (id) => {
      const r = await call('get', [id]);
      return r ? invocationOf(r) : null;
    },
    results: async (queue, ids, o = {}) =>
      Promise.all(
        ((await call('results', [queue, ids], { timeout: s(o.timeoutMs) ?? 30 })) as Json[]).map(async (r): Promise<Ended> => {
          if (r.error === undefined) {
            const bytes = unb64(r.result);
            // Python answers b"" for an ack without a result; the row says which it was.
            return { id: r.id, ok: true, result: bytes.length || (await call('get', [r.id]))?.result ? bytes : null };
          }
          const e = r.error;
          if (e.$error === 'invocation_failed') return { id: r.id, ok: false, error: new InvocationFailedError(r.id, e.error) };
          if (e.$error === 'invocation_cancelled') return { id: r.id, ok: false, error: new InvocationCancelledError(r.id) };
          return { id: r.id, ok: false, error: errorFor(e.$error, e.message) };
        }),
      ),
    result: async (id, o = {}) => {
      const bytes = unb64(await call('result', [id], { timeout: s(o.timeoutMs) ?? 30 }));
      // Python answers b"" for an ack without a result; the row says which it was.
      return bytes.length ? bytes : (await call('get', [id]))?.result ? bytes : null;
    },
    count: (queue, state = 'queued') => call('count', [queue, state]),
    journalAppend: async (id, seq, frame, o = {}) => {
      // The frame's bytes as the contract writes them, unchecked here: the Python plane checks them.
      const bytes =
        frame instanceof Uint8Array
          ? frame
          : new TextEncoder().encode(
              JSON.stringify([frame.kind, seq ?? 0, Buffer.from(frame.body).toString('base64'), frame.meta ?? null]),
            );
      const kind = (JSON.parse(new TextDecoder().decode(bytes)) as [number])[0];
      const final = o.final ?? (kind === 3 || kind === 4);
      return call('journal_append', [id, seq, b64(bytes)], { final, worker_id: o.workerId ?? null, attempt: o.attempt ?? null });
    },
    journalRead: (id, o = {}) =>
      streamed<JournalFrame>((push, named) =>
        call('journal_read', [id], { since: o.since ?? -1, timeout: s(o.timeoutMs) ?? 3600 }, (f) => push(frameOf(f)), named),
      ),
    journalPage: async (id, o = {}) => {
      const p = await call('journal_page', [id], { since: o.since ?? -1, limit: o.limit ?? 1000 });
      const oc = p.outcome;
      return {
        frames: p.frames.map(frameOf),
        next: p.next,
        trimmedBefore: p.trimmed_before,
        done: p.done,
        state: p.state,
        outcome:
          oc === null
            ? null
            : oc.state === 'succeeded'
              ? { state: 'succeeded', result: oc.result ? unb64(oc.result) : null }
              : { state: oc.state, error: oc.error },
      } as JournalPage;
    },
    journalTrim: (id, keepLast) => call('journal_trim', [id], { keep_last: keepLast }),
    configureQueue: async (queue, c) => {
      const b = c.retryBackoff;
      const wire: Json = {
        lease_ms: c.leaseMs,
        max_attempts: c.maxAttempts,
        max_running: c.maxRunning,
        claims_per_second: c.claimsPerSecond,
        retry_backoff: b === undefined ? undefined : b && { initial_ms: b.initialMs, factor: b.factor, max_ms: b.maxMs, jitter: b.jitter },
        dead_letter_queue: c.deadLetterQueue,
        ttl_ms: c.ttlMs,
        retention_ms: c.retentionMs,
        journal_retention_ms: c.journalRetentionMs,
        time_limit_ms: c.timeLimitMs,
        push:
          c.push === undefined
            ? undefined
            : c.push && {
                url: c.push.url,
                concurrency: c.push.concurrency,
                timeout_ms: c.push.timeoutMs,
                batch_size: c.push.batchSize,
                rotate_secret: c.push.rotateSecret,
              },
      };
      // A setting left out keeps its value: it is not sent (a null clears it).
      return queueInfoOf(
        await call('configure_queue', [queue], Object.fromEntries(Object.entries(wire).filter(([, v]) => v !== undefined))),
      );
    },
    queueInfo: async (queue) => queueInfoOf(await call('queue_info', [queue])),
    listQueues: () => call('list_queues'),
    getMany: async (ids) => ((await call('get_many', [ids])) as (Json | null)[]).map((r) => (r === null ? null : summaryOf(r))),
    list: async (queue, o = {}) => {
      const p = await call('list', [queue], { state: o.state ?? 'queued', limit: o.limit ?? 50, cursor: o.cursor ?? null });
      return { items: p.items.map(summaryOf), cursor: p.cursor };
    },
    overview: async (queues) => (await call('overview', [queues?.length ? queues : null])).map(overviewOf),
    overviewPage: async (o = {}) => {
      const page = await call('overview_page', [], { after: o.after ?? null, limit: o.limit ?? null });
      return { queues: page.queues.map(overviewOf), next: page.next };
    },
    retry: async (id) => void (await call('retry', [id])),
    redrive: (queue, o = {}) => call('redrive', [queue], { limit: o.limit ?? null, dead_letters: o.deadLetters ?? false }),
    delete: async (id) => void (await call('delete', [id])),
    purge: async (queue, o) => Number(await call('purge', [queue], { state: o?.state, limit: o?.limit ?? null })),
    pauseQueue: async (queue) => void (await call('pause_queue', [queue])),
    resumeQueue: async (queue) => void (await call('resume_queue', [queue])),
    events: (queue, o = {}) =>
      streamed<FeedItem>(
        (push, named) => call('events', [queue], { kinds: o.kinds ?? null }, (r) => push(r as FeedItem), named),
        o.signal,
        (n) => void call('_stop', [n]),
      ),
    workerLog: async (queue, workerId, lines) => void (await call('worker_log', [queue, workerId, lines])),
    workers: () => call('workers'),
    workerStopped: async (queue, workerId) => void (await call('worker_stopped', [queue, workerId])),
    metrics: () => call('metrics'),
    setSchedule: async (queue, name, o) =>
      scheduleOf(
        await call('set_schedule', [queue, name], {
          cron: o.cron,
          envelope: b64(o.envelope),
          timezone: o.timezone ?? null,
          priority: o.priority ?? 0,
        }),
      ),
    listSchedules: async (queue) => (await call('list_schedules', [queue])).map(scheduleOf),
    removeSchedule: async (queue, name) => void (await call('remove_schedule', [queue, name])),
    storage: async () => {
      const st = await call('storage');
      return { shard: st.shard, bytes: st.bytes, limitBytes: st.limit_bytes, highWaterBytes: st.high_water_bytes, full: st.full };
    },
    close: async () => {},
  };
  const plane = new Proxy(verbs, {
    get: (t, prop) => (typeof prop === 'string' && !(prop in t) && prop !== 'then' ? unsupported(prop) : Reflect.get(t, prop)),
  }) as unknown as DispatchPlane;
  await until(async () => (await call('_parked')) === 0, 'the Python bridge to answer', 20_000);
  return {
    plane,
    async dispose() {
      child.stdin!.write(`${JSON.stringify({ m: '_close' })}\n`);
      await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
    },
    parked: () => call('_parked'),
    // The bridge moves the Python process's time.time (the plane's clock) as the memory plane's injected clock moves.
    elapse: async (ms) => {
      offset += ms;
      await call('_elapse', [ms]);
    },
    now: () => Date.now() + offset,
    shortLeaseMs: 1_000,
    movableClock: true,
    // `lakeshore push` on the Python plane's file: the Node pusher, through a Node Dispatch of the same file.
    pushesFromAnotherProcess: true,
    pushFrom: () => {
      const node = new Dispatch(join(dir, 'dispatch.sqlite'), { namespace });
      const pushing = startPushing(node);
      return {
        stop: async () => {
          await pushing.stop();
          await node.close();
        },
      };
    },
  };
}
