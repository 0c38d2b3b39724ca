/**
 * Traces with no tracer provider registered (client/tracing.ts), the way most workers run: no span
 * is made where it would carry nothing, yet the trace a job's envelope names still reaches its log
 * lines, and, with a context manager registered, the jobs it submits (one trace across the cascade,
 * recorded or not).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { currentJob, decodeEnvelope, Dispatch, Handle, Queue, runWorker, type FeedItem, type LogRecord } from '../../client/local/index.ts';

afterEach(() => {
  context.disable();
});

const traceIdOf = (tp: string | null | undefined) => tp?.split('-')[1];

/** Runs a `parent` job submitted through the Queue API; it logs a line and submits `child`. */
async function cascade(ns: string) {
  const d = new Dispatch(':memory:', { namespace: ns });
  const ac = new AbortController();
  const feed = d.events('t', { signal: ac.signal, kinds: ['worker'] })[Symbol.asyncIterator]();
  const registry = {
    parent: async () => {
      currentJob().log('parent ran');
      return (await new Queue('t', { dispatch: d }).submit('child')).id;
    },
    child: () => 'ok',
  };
  const stop = new AbortController();
  const worker = runWorker('t', { dispatch: d, registry, concurrency: 2, stop: stop.signal, claimWaitMs: 200, log: () => {} });
  try {
    const h = await new Queue('t', { dispatch: d }).submit<string>('parent');
    const childId = await h.result({ timeoutMs: 20_000 });
    expect(await new Handle<string>(childId, d).result({ timeoutMs: 20_000 })).toBe('ok');
    let line: LogRecord | undefined;
    while (!line) {
      const r = (await feed.next()).value as FeedItem;
      if (r.kind === 'worker' && 'level' in r) line = r;
    }
    const tp = (id: string) => d.get(id).then((r) => decodeEnvelope(r!.envelope).traceparent);
    return { parent: await tp(h.id), child: await tp(childId), logged: line.trace_id };
  } finally {
    ac.abort();
    stop.abort();
    await worker;
    await d.close();
  }
}

describe('traces with no tracer provider', () => {
  it("a job's log lines carry the trace its envelope names", async () => {
    const { parent, logged } = await cascade('off-plain');
    expect(traceIdOf(parent)).toMatch(/^[0-9a-f]{32}$/);
    expect(logged).toBe(traceIdOf(parent));
  });

  it('with a context manager registered, the jobs a job submits join its trace', async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    const { parent, child, logged } = await cascade('off-context');
    expect(logged).toBe(traceIdOf(parent));
    expect(traceIdOf(child)).toBe(traceIdOf(parent));
  });
});
