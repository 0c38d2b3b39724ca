/** The producer API (Queue, Handle, dispatchByName) and runWorker in-process, on both planes. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { work } from '../support/wait.ts';
import {
  FrameKind,
  InvocationCancelledError,
  InvocationFailedError,
  Queue,
  currentJob,
  decodeEnvelope,
  dispatchByName,
  runWorker,
  setOriginFor,
  setRoutes,
  type RouteTable,
} from '../../client/local/index.ts';
import { bothPlanes, client } from './setup/client.ts';
import { tempDir } from '../support/tmp.ts';

const planes = bothPlanes('q');

describe.each(planes)('Queue API on the %s plane', (_name, make) => {
  it('submits a call, streams its yields while it runs, then answers its result', async () => {
    const d = make();
    const q = new Queue('gpu', { dispatch: d });
    async function* train(epochs: number) {
      for (let e = 0; e < epochs; e++) {
        await work(50);
        yield { epoch: e, loss: 1 / (e + 1) };
      }
      return 'trained';
    }
    const h = await q.submit(train, 3);
    expect(typeof h.id).toBe('string');
    const seen: unknown[] = [];
    const streaming = (async () => {
      for await (const v of h.stream({ timeoutMs: 20_000 })) seen.push(v);
    })();
    expect(await runWorker('gpu', { dispatch: d, registry: { train }, once: true })).toBe(1);
    await streaming;
    expect(seen).toEqual([
      { epoch: 0, loss: 1 },
      { epoch: 1, loss: 0.5 },
      { epoch: 2, loss: 1 / 3 },
    ]);
    expect(await h.result()).toBe('trained');
    await d.close();
  });

  it('coalesces many small writes into few CHUNK frames, bytes in order and unchanged', async () => {
    const d = make();
    const q = new Queue('chat', { dispatch: d });
    const N = 2_000;
    async function talk() {
      const job = currentJob();
      for (let i = 0; i < N; i++) {
        job.write(`t${i} `); // a token at a time, as a model streams them
        if (i % 10 === 9) await new Promise((r) => setImmediate(r));
      }
      job.write(new TextEncoder().encode('!'));
      return 'said';
    }
    const h = await q.submit(talk);
    expect(await runWorker('chat', { dispatch: d, registry: { talk }, once: true })).toBe(1);
    expect(await h.result()).toBe('said');
    const chunks: Uint8Array[] = [];
    for await (const f of d.journalRead(h.id, { timeoutMs: 10_000 })) if (f.kind === FrameKind.CHUNK) chunks.push(f.body);
    const text = chunks.map((b) => new TextDecoder().decode(b)).join('');
    expect(text).toBe(`${Array.from({ length: N }, (_, i) => `t${i} `).join('')}!`);
    console.log(`[chunks] ${_name}: ${N + 1} writes -> ${chunks.length} CHUNK frames`);
    expect(chunks.length).toBeLessThan(N / 10);
    await d.close();
  });

  it('passes kwargs as a last argument and gives the handler its job context', async () => {
    const d = make();
    const q = new Queue('cpu', { dispatch: d });
    const h = await q.submitWith({ kwargs: { scale: 10 } }, 'mul', 4);
    const mul = (x: number, kw: { scale: number }) => ({ product: x * kw.scale, attempt: currentJob().attempt, id: currentJob().id });
    await runWorker('cpu', { dispatch: d, registry: { mul }, once: true });
    expect(await h.result()).toEqual({ product: 40, attempt: 1, id: h.id });
    await d.close();
  });

  it('a job submitted inside a job gets its origin, as setOriginFor decides', async () => {
    const d = make();
    const q = new Queue('orig', { dispatch: d });
    const parent = async () => (await q.submitWith({ id: `kid-${currentJob().id}` }, 'kid')).id;
    const originOfKid = async (id: string) => decodeEnvelope((await d.get(`kid-${id}`))!.envelope).origin ?? null;
    // Runs jobs one at a time until the queue is empty.
    const serve = async () => {
      while (await runWorker('orig', { dispatch: d, registry: { parent, kid: () => 2 }, once: true, onceWaitMs: 100 })) {}
    };
    await q.submitWith({ id: 'p1', origin: 'req-1' }, 'parent');
    await q.submitWith({ id: 'p0' }, 'parent');
    await serve();
    expect([await originOfKid('p1'), await originOfKid('p0')]).toEqual(['req-1', null]);
    setOriginFor((job) => `from:${job.id}`);
    try {
      await q.submitWith({ id: 'p2', origin: 'req-2' }, 'parent');
      await serve();
      expect(await originOfKid('p2')).toBe('from:p2');
    } finally {
      setOriginFor(null);
    }
    await d.close();
  });

  it('dispatchByName(name, payload) takes the process’s routes: setRoutes, else the JSON file LAKESHORE_ROUTES names', async () => {
    const d = make();
    const file = join(tempDir('lakeshore-routes-'), 'routes.json');
    writeFileSync(file, JSON.stringify({ train: { queue: 'gpu', time_limit_ms: 3_600_000, max_retries: 2 }, index: { queue: 'cpu' } }));
    const before = process.env.LAKESHORE_ROUTES;
    process.env.LAKESHORE_ROUTES = file;
    try {
      const on = { dispatch: d }; // the plane under test; the routes are the process's
      const t = await dispatchByName('train', { epochs: 3 }, on);
      const inv = (await d.get(t.id))!;
      expect(inv.queue).toBe('gpu');
      expect(decodeEnvelope(inv.envelope)).toMatchObject({ fn: 'train', kwargs: { epochs: 3 }, time_limit_ms: 3_600_000, max_retries: 2 });
      expect((await d.get((await dispatchByName('index', [1], on)).id))!.queue).toBe('cpu');
      expect((await d.get((await dispatchByName('other', [1], on)).id))!.queue).toBe('default');
      // setRoutes wins over the file.
      setRoutes({ train: { queue: 'tpu' } });
      expect((await d.get((await dispatchByName('train', [], on)).id))!.queue).toBe('tpu');
    } finally {
      setRoutes(null);
      if (before === undefined) delete process.env.LAKESHORE_ROUTES;
      else process.env.LAKESHORE_ROUTES = before;
    }
    await d.close();
  });

  it('a stream of a job that fails throws its failure after its last value; one that is cancelled, the cancel', async () => {
    const d = make();
    const q = new Queue('streams', { dispatch: d });
    function* failsAfterOne() {
      yield 1;
      throw new Error('boom');
    }
    const failing = await q.submitWith({ maxAttempts: 1 }, failsAfterOne);
    const plain = await q.submitWith({ maxAttempts: 1 }, 'plainFails');
    const good = await q.submit('fine');
    const registry = { failsAfterOne, plainFails: () => Promise.reject(new Error('no values')), fine: () => 7 };
    while (await runWorker('streams', { dispatch: d, registry, once: true, onceWaitMs: 200 })) {}
    const seen: unknown[] = [];
    const drain = async (h: { stream(): AsyncGenerator<unknown> }) => {
      for await (const v of h.stream()) seen.push(v);
    };
    await expect(drain(failing)).rejects.toBeInstanceOf(InvocationFailedError);
    expect(seen).toEqual([1]);
    await expect(drain(plain)).rejects.toThrow('no values');
    await drain(good); // no values, and no throw: it succeeded
    const cancelled = await q.submit('never');
    await cancelled.cancel();
    await expect(drain(cancelled)).rejects.toBeInstanceOf(InvocationCancelledError);
    expect(seen).toEqual([1]);
    await d.close();
  });

  it('submitWith takes the verb’s scheduling options and refuses one it does not take, naming it', async () => {
    const d = make();
    const q = new Queue('sched', { dispatch: d });
    const before = Date.now();
    const later = await q.submitWith({ delayMs: 60_000, ttlMs: 120_000, maxAttempts: 5 }, 'later');
    const row = await d.get(later.id);
    expect(row).toMatchObject({ state: 'delayed', maxAttempts: 5 });
    expect(row!.runAt! - before).toBeGreaterThanOrEqual(60_000);
    expect(row!.expiresAt! - row!.runAt!).toBeGreaterThanOrEqual(59_000);
    const at = Date.now() + 3_600_000;
    expect(await d.get((await q.submitWith({ runAt: at, expiresAt: at + 1_000 }, 'at')).id)).toMatchObject({
      state: 'delayed',
      runAt: at,
      expiresAt: at + 1_000,
    });
    // Python's spelling, ignored, would submit at once: it is refused, and nothing is submitted.
    const counted = await d.count('sched', 'queued');
    await expect(q.submitWith({ delay: 5 } as never, 'now')).rejects.toThrow(/^submitWith: no option delay \(delayMs, perhaps\)/);
    expect(await d.count('sched', 'queued')).toBe(counted);
    // A function with no name could never be found by a worker: refused before anything is sent.
    await expect(q.submit(() => 1)).rejects.toThrow(/^an anonymous function has no name a worker can find/);
    await expect(q.submit(123 as never)).rejects.toThrow("submit needs a function or a function's name, got number");
    expect(await d.count('sched', 'queued')).toBe(counted);
    // The verb says a missing id as the plane does, on either plane.
    await expect(d.submit('sched', new Uint8Array([123, 125]), {} as never)).rejects.toThrow('id must be a string');
  });

  it('schedules a call as submit makes one: each tick submits it; lists, replaces and removes by name', async () => {
    const d = make();
    const q = new Queue('cron', { dispatch: d });
    function report(region: string, opts: { days: number }) {
      return `${region} ${opts.days}`;
    }
    const nightly = await q.scheduleWith(
      { timezone: 'Europe/Berlin', priority: 3, kwargs: { days: 7 }, timeLimitMs: 60_000, maxRetries: 2 },
      'nightly',
      '0 3 * * *',
      report,
      'eu',
    );
    expect(nightly).toMatchObject({ queue: 'cron', name: 'nightly', cron: '0 3 * * *', timezone: 'Europe/Berlin', priority: 3 });
    expect(decodeEnvelope(nightly.envelope)).toMatchObject({
      fn: 'report',
      args: ['eu'],
      kwargs: { days: 7 },
      time_limit_ms: 60_000,
      max_retries: 2,
      traceparent: null,
    });
    // Every second: its ticks submit the call, which a worker runs by the name it was scheduled with.
    await q.schedule('each-second', '* * * * * *', 'tick', 2, 'x');
    let job = null;
    for (let i = 0; i < 5 && !job; i++) job = await d.claim('cron', 'w', { waitMs: 2_000 });
    expect(job?.id).toMatch(/^schedule:cron:each-second:\d+000$/);
    expect(decodeEnvelope(job!.envelope)).toMatchObject({ fn: 'tick', args: [2, 'x'], kwargs: {} });
    expect((await q.schedules()).map((s) => s.name)).toEqual(['each-second', 'nightly']);
    await q.unschedule('each-second');
    expect((await q.schedules()).map((s) => s.name)).toEqual(['nightly']);
    await expect(q.unschedule('each-second')).rejects.toThrow(/not found/);
    // Refused before anything is set: an option it does not take, a function with no name.
    await expect(q.scheduleWith({ tz: 'UTC' } as never, 'utc', '0 3 * * *', 'x')).rejects.toThrow(
      /^scheduleWith: no option tz \(timezone, perhaps\); its options are timezone, priority, /,
    );
    await expect(q.schedule('anon', '0 3 * * *', () => 1)).rejects.toThrow(/^an anonymous function has no name a worker can find/);
    await expect(q.schedule('num', '0 3 * * *', 5 as never)).rejects.toThrow("schedule needs a function or a function's name, got number");
    expect((await q.schedules()).map((s) => s.name)).toEqual(['nightly']);
    await q.unschedule('nightly');
    await d.close();
  });

  it('maps a function over argument lists in few requests, answering handles in order', async () => {
    const d = make();
    const q = new Queue('sweep', { dispatch: d });
    const add = (a: number, b: number) => a + b;
    const handles = await q.map<number>(add, [
      [1, 10],
      [2, 20],
      [3, 30],
    ]);
    while ((await runWorker('sweep', { dispatch: d, registry: { add }, once: true, onceWaitMs: 200 })) > 0);
    expect(await Promise.all(handles.map((h) => h.result()))).toEqual([11, 22, 33]);
    expect(await q.map(add, [])).toEqual([]);
    await expect(q.map(add, [1, 2] as never)).rejects.toThrow(/^map\(fn, argsList\) takes a list of argument lists/);
    // A job refused (its envelope too large) is thrown once all were tried; the others went in.
    const big = 'x'.repeat(2 << 20);
    const refused = await q
      .map(add, [
        ['a', 1],
        [big, 2],
        ['c', 3],
      ])
      .catch((e: Error & { handles: unknown[] }) => e);
    expect(refused).toBeInstanceOf(Error);
    expect((refused as { handles: unknown[] }).handles.map((h) => h === null)).toEqual([false, true, false]);
    expect(await d.count('sweep', 'queued')).toBe(2);
    await d.close();
  });

  it('has the verbs refuse an option they do not take, naming what it likely meant, changing nothing', async () => {
    const d = make();
    const env = new Uint8Array([123, 125]);
    await expect(d.submit('verbs', env, { id: 'a', delay: 5_000 } as never)).rejects.toThrow(
      /^submit: no option delay \(delayMs, perhaps\); its options are id, key, /,
    );
    await expect(d.submitMany('verbs', [{ envelope: env, opts: { id: 'b', ttl: 5 } as never }])).rejects.toThrow(
      /^submit: no option ttl \(ttlMs, perhaps\)/,
    );
    expect(await d.count('verbs')).toBe(0);
    await d.submit('verbs', env, { id: 'c' });
    await expect(d.claim('verbs', 'w', { wait: 1_000 } as never)).rejects.toThrow(/^claim: no option wait \(waitMs, perhaps\)/);
    await expect(d.claimMany('verbs', 'w', 2, { lease_ms: 1_000 } as never)).rejects.toThrow(
      /^claim: no option lease_ms \(leaseMs, perhaps\)/,
    );
    expect(await d.count('verbs', 'queued')).toBe(1); // nothing was claimed
    const c = (await d.claim('verbs', 'w'))!;
    await expect(d.nack(c.id, 'w', { error: 'x', delay: 1_000 } as never)).rejects.toThrow(/^nack: no option delay \(delayMs, perhaps\)/);
    expect(await d.count('verbs', 'running')).toBe(1); // the refused nack left the job with its worker
    await d.close();
  });

  it('reads and cancels its job through the handle', async () => {
    const d = make();
    const h = await new Queue('cpu', { dispatch: d }).submit('never');
    expect((await h.get())!.state).toBe('queued');
    expect(await h.cancel()).toBe(true);
    expect((await h.get())!.state).toBe('cancelled');
    await d.delete(h.id);
    expect(await h.get()).toBeNull();
    await d.close();
  });

  it('routes by name to the pool, priority, time limit and retries of its route, loading no handler', async () => {
    const d = make();
    const routes: RouteTable = {
      render: { queue: 'gpu', priority: 5, timeLimitMs: 100, maxRetries: 0 },
      index: { queue: 'cpu' },
    };
    const h = await dispatchByName('render', { scene: 'a' }, { routes, dispatch: d });
    const inv = (await d.get(h.id))!;
    expect(inv).toMatchObject({ queue: 'gpu', priority: 5 });
    expect(decodeEnvelope(inv.envelope)).toMatchObject({
      fn: 'render',
      args: [],
      kwargs: { scene: 'a' },
      time_limit_ms: 100,
      max_retries: 0,
    });
    // A name no route names goes to the pool `default`, as it is.
    const unrouted = await dispatchByName('nope', [1], { routes, dispatch: d });
    expect(await d.get(unrouted.id)).toMatchObject({ queue: 'default', priority: 0 });
    // The route's time limit aborts a handler that runs too long, and its max_retries=0 fails it.
    const render = async () => {
      await work(2_000);
      return 'late';
    };
    await runWorker('gpu', { dispatch: d, registry: { render }, once: true, retries: 5 });
    await expect(h.result({ timeoutMs: 5_000 })).rejects.toBeInstanceOf(InvocationFailedError);
    await expect(h.result()).rejects.toMatchObject({ error: { type: 'TimeLimitExceeded' } });
    const frames = [];
    for await (const f of d.journalRead(h.id, { timeoutMs: 5_000 })) frames.push(f.kind);
    expect(frames).toEqual([FrameKind.ERROR]);
    await d.close();
  });
});

describe('imports named by an envelope', () => {
  const root = tempDir('lakeshore-root-');
  writeFileSync(join(root, 'mod.mjs'), 'export function triple(x) { return 3 * x; }\n');

  it('are refused with a clear error unless allowed, then resolved under the root', async () => {
    const d = client();
    const q = new Queue('imp', { dispatch: d });
    const refused = await q.submitWith({ module: './mod.mjs#triple' }, 'triple', 2);
    await runWorker('imp', { dispatch: d, root, once: true }); // HTTP plane: importing is off by default
    await expect(refused.result()).rejects.toMatchObject({ error: { message: expect.stringMatching(/importing .* is off/) } });
    const allowed = await q.submitWith({ module: './mod.mjs#triple' }, 'triple', 2);
    await runWorker('imp', { dispatch: d, root, once: true, allowImport: true });
    expect(await allowed.result()).toBe(6);
    const outside = await q.submitWith({ module: '../../etc/passwd#x' }, 'x');
    await runWorker('imp', { dispatch: d, root, once: true, allowImport: true });
    await expect(outside.result()).rejects.toMatchObject({ error: { message: expect.stringMatching(/outside the worker's root/) } });
  });
});
