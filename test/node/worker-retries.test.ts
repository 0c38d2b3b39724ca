/**
 * A worker's `retries` is the budget where neither the job nor its queue sets one (the contract's
 * "retrying while attempt <= retries"), on both planes: retries 5 runs a failing job 6 times, not
 * the plane's default 3; without retries the plane's default stands; a queue's budget wins.
 */
import { mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { until } from '../support/wait.ts';
import { encodeEnvelope, FrameKind, runWorker, type OnDone } from '../../client/local/index.ts';
import { loadModule } from '../../client/worker/load-module.ts';
import { registeredFrom, type Registry } from '../../client/worker/resolve.ts';
import { bothPlanes } from './setup/client.ts';

describe.each(bothPlanes('retries'))('a worker’s retries on the %s plane', (_name, make) => {
  it('govern the attempt budget only where neither the job nor its queue sets one', async () => {
    const d = make();
    const tries = new Map<string, number>();
    const always = (id: string) => {
      tries.set(id, (tries.get(id) ?? 0) + 1);
      throw new Error('not today');
    };
    await d.configureQueue('capped', { maxAttempts: 2 });
    const serve = async (queue: string, id: string, retries?: number) => {
      await d.submit(queue, encodeEnvelope({ fn: 'always', args: [id] }), { id });
      const stop = new AbortController();
      const ran = runWorker(queue, { dispatch: d, registry: { always }, stop: stop.signal, ...(retries === undefined ? {} : { retries }) });
      await until(async () => (await d.get(id))?.state === 'failed', `${id} to fail for good`);
      stop.abort();
      await ran;
    };
    await serve('q', 'five', 5);
    await serve('q', 'default');
    await serve('capped', 'queue-wins', 5);
    expect(Object.fromEntries(tries)).toEqual({ five: 6, default: 3, 'queue-wins': 2 });
    await d.close();
  });

  it('count in the job’s current budget: a job an operator retried gets them again', async () => {
    // The attempt number goes on across the retry (3, 4, ...): counted against it, the job failed for
    // good at its first failure after the retry.
    const d = make();
    let runs = 0;
    const flaky = () => {
      if (++runs <= 3) throw new Error(`run ${runs} fails`);
      return runs;
    };
    await d.submit('q', encodeEnvelope({ fn: 'flaky', args: [] }), { id: 'again' });
    const serve = async (want: string) => {
      const stop = new AbortController();
      const ran = runWorker('q', { dispatch: d, registry: { flaky }, stop: stop.signal, retries: 1 });
      await until(async () => (await d.get('again'))?.state === want, `the job to be ${want}`);
      stop.abort();
      await ran;
    };
    await serve('failed');
    expect([runs, (await d.get('again'))!.attempt]).toEqual([2, 2]);
    await d.retry('again');
    await serve('succeeded');
    expect([runs, (await d.get('again'))!.attempt]).toEqual([4, 4]);
    await d.close();
  });

  it('keep a failed job’s stack down to its handler, without the worker’s own frames', async () => {
    const d = make();
    const inner = (x: number) => {
      throw new Error(`deep ${x}`);
    };
    const outer = (x: number) => inner(x);
    await d.submit('q', encodeEnvelope({ fn: 'outer', args: [7] }), { id: 'deep' });
    expect(await runWorker('q', { dispatch: d, registry: { outer }, retries: 0, once: true })).toBe(1);
    const stack = ((await d.get('deep'))!.error as { stack: string }).stack.split('\n');
    expect(stack[0]).toBe('Error: deep 7');
    expect(stack[1]).toMatch(/^\s+at inner \(.*worker-retries\.test\.ts:/);
    expect(stack.at(-1)).toMatch(/^\s+at outer \(.*worker-retries\.test\.ts:/);
    // An error the worker raised itself keeps every frame it has.
    await d.submit('q', encodeEnvelope({ fn: 'ghost', args: [] }), { id: 'own' });
    await runWorker('q', { dispatch: d, registry: {}, once: true });
    expect(((await d.get('own'))!.error as { stack: string }).stack).toMatch(/client\/worker\//);
    await d.close();
  });

  it('fail a job naming a function the worker does not have at once, saying where one comes from', async () => {
    const d = make();
    await d.submit('q', encodeEnvelope({ fn: 'ghost', args: [] }), { id: 'ghost' });
    expect(await runWorker('q', { dispatch: d, registry: {}, retries: 5, once: true })).toBe(1);
    const row = await d.get('ghost');
    expect(row).toMatchObject({ state: 'failed', attempt: 1 });
    expect(row?.error?.message).toContain('"ghost" is not registered with this worker, and the job names no module');
    // A misspelling of a name it has is told that name.
    await d.submit('q', encodeEnvelope({ fn: 'cuont', args: [] }), { id: 'typo' });
    await runWorker('q', { dispatch: d, registry: { count: () => 1, other: () => 2 }, once: true });
    expect((await d.get('typo'))?.error?.message).toContain('"cuont" is not registered with this worker (it has "count", perhaps), and');
    // Functions loaded from a file (the CLI's --module; or a module a job names) that gained one
    // since: the worker says it runs the code it loaded.
    const dir = mkdtempSync(join(tmpdir(), 'lakeshore-registry-'));
    const file = join(dir, 'handlers.mjs');
    writeFileSync(file, 'export const count = () => 1;\n');
    const loaded = (await loadModule(file)) as Registry;
    registeredFrom(loaded, file);
    const missing = async (id: string, env: Parameters<typeof encodeEnvelope>[0]) => {
      await d.submit('q', encodeEnvelope(env), { id });
      await runWorker('q', { dispatch: d, registry: loaded, root: dir, allowImport: true, once: true });
      return (await d.get(id))?.error?.message ?? '';
    };
    expect(await missing('untouched', { fn: 'cube' })).toMatch(/--module PATH#EXPORT\)$/);
    expect(await missing('untouched-import', { fn: 'cube', module: 'handlers.mjs#cube' })).toMatch(/has no exported function "cube"$/);
    writeFileSync(file, 'export const count = () => 1;\nexport const cube = (x) => x ** 3;\n');
    // (a second on: a file system stamps with a coarser clock than Date.now(); an edit comes seconds later)
    utimesSync(file, new Date(Date.now() + 1000), new Date(Date.now() + 1000));
    const restart =
      /; handlers\.mjs changed after this worker loaded it, and a worker runs the code it loaded: start it again to run the change$/;
    expect(await missing('edited', { fn: 'cube' })).toMatch(restart);
    expect(await missing('edited-import', { fn: 'cube', module: 'handlers.mjs#cube' })).toMatch(restart);
    await d.close();
  });

  it('fail a job whose result is larger than the plane takes at once, saying so, not as a lease run out', async () => {
    const d = make();
    const big = 'x'.repeat(2 << 20);
    const registry = {
      huge: () => big,
      *hugeStream() {
        yield 1;
        return big;
      },
      *hugeValue() {
        yield 'y'.repeat(300 << 10); // a frame takes 256 KiB
      },
    };
    for (const fn of Object.keys(registry)) {
      await d.submit('too-big', encodeEnvelope({ fn, args: [] }), { id: `big-${fn}` });
      // onDone hears the outcome the job has: the failure, never the success its handler returned.
      const heard: string[] = [];
      const onDone: OnDone = (_job, out) => void heard.push(out.state === 'failed' ? `failed:${out.error.name}` : out.state);
      await runWorker('too-big', { dispatch: d, registry, retries: 3, once: true, onDone });
      expect(heard, fn).toEqual(['failed:PayloadTooLargeError']);
      const row = await d.get(`big-${fn}`);
      // The type is the class thrown: the refused ack's PayloadTooLarge, an append's PayloadTooLargeError.
      expect(row, fn).toMatchObject({ state: 'failed', attempt: 1, error: { type: expect.stringMatching(/^PayloadTooLarge/) } });
      if (fn !== 'hugeValue') expect(row?.error?.message, fn).toMatch(/^the handler's result is too large for the plane: /);
    }
    await d.close();
  });

  it('fail a job whose result JSON cannot write as its handler’s TypeError, at once, its stream ending in that error', async () => {
    const d = make();
    const registry = {
      big: () => 10n,
      cycle: () => {
        const a: Record<string, unknown> = {};
        a.self = a;
        return a;
      },
      *counted() {
        yield 1;
        return 10n;
      },
      yieldsBig: function* () {
        yield 10n;
      },
      thrown: () => {
        throw { code: 42 };
      },
      ok: () => 'fine',
    };
    for (const fn of Object.keys(registry)) await d.submit('json', encodeEnvelope({ fn, args: [] }), { id: `json-${fn}` });
    const stop = new AbortController();
    // retries: 3, yet each not-JSON job runs once: it would answer the same again.
    const ran = runWorker('json', { dispatch: d, registry, retries: 3, stop: stop.signal, leaseMs: 60_000 });
    const ids = Object.keys(registry).map((fn) => `json-${fn}`);
    // Within a few seconds: not a lease (60 s) running out on a job whose ack never went.
    await until(
      async () => (await Promise.all(ids.map((id) => d.get(id)))).every((r) => r?.state !== 'running' && r?.state !== 'queued'),
      'every job to end',
      10_000,
    );
    stop.abort();
    await ran;
    expect((await d.get('json-ok'))?.state).toBe('succeeded');
    for (const [fn, what] of [
      ['big', 'result'],
      ['cycle', 'result'],
      ['counted', 'result'],
      ['yieldsBig', 'a value it yielded'],
    ]) {
      const row = await d.get(`json-${fn}`);
      expect(row, fn).toMatchObject({ state: 'failed', attempt: 1, error: { type: 'TypeError' } });
      expect(row?.error?.message, fn).toContain(`the handler's ${what} is not JSON`);
    }
    // The generator's stream ends in the error, not in an END that said it went well.
    const kinds: number[] = [];
    for await (const f of d.journalRead('json-counted')) kinds.push(f.kind);
    expect(kinds).toEqual([FrameKind.BEGIN, FrameKind.VALUE, FrameKind.ERROR]);
    expect((await d.get('json-thrown'))?.error?.message).toBe('a non-Error was thrown: {"code":42}');
    await d.close();
  });
});

describe('runWorker’s arguments', () => {
  it('refuses options passed as the queue, or options it does not take, naming the mistake, before it claims anything', async () => {
    const opts = { registry: {} } as unknown as string;
    await expect(runWorker(opts)).rejects.toThrow('not an object (the options come second)');
    await expect(runWorker([7 as unknown as string])).rejects.toThrow("queues is a queue's name or an array of names, not a number");
    // An option it does not take is refused, not ignored: a worker that ignored `handlers` would fail every job it claimed.
    const handlers = { handlers: { f: () => 1 }, concurrency: 2 } as unknown as Parameters<typeof runWorker>[1];
    await expect(runWorker('q', handlers)).rejects.toThrow(
      /^runWorker: no option handlers \(registry, perhaps\); its options are dispatch, registry, /,
    );
    await expect(runWorker('q', 'fast' as unknown as Parameters<typeof runWorker>[1])).rejects.toThrow('options is an object, not fast');
  });
});
