/**
 * Traces (client/tracing.ts) with the OpenTelemetry SDK's in-memory exporter: a producer span, its
 * consumer span and a child job's spans form one tree; a job submitted inside a job gets it as
 * `parent`; a handler's log lines carry their trace. And the done hook: a failure answered
 * 'handled' fails without a retry.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { context, SpanKind, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import {
  currentJob,
  Dispatch,
  encodeEnvelope,
  Handle,
  Queue,
  runWorker,
  type DoneJob,
  type FeedItem,
  type LogRecord,
} from '../../client/local/index.ts';

const exporter = new InMemorySpanExporter();
const manager = new AsyncLocalStorageContextManager();

beforeAll(() => {
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
  context.setGlobalContextManager(manager.enable());
});

afterAll(() => {
  trace.disable();
  context.disable();
});

const parentOf = (s: ReadableSpan) => (s as unknown as { parentSpanContext?: { spanId: string } }).parentSpanContext?.spanId;

describe('traces', () => {
  it('a submit, its job, and a job that job submits form one trace tree; the child job names its parent', async () => {
    const d = new Dispatch(':memory:', { namespace: 'traces' });
    const q = new Queue('t', { dispatch: d });
    const registry = {
      parentJob: async () => (await new Queue('t', { dispatch: d }).submit('childJob', 21)).id,
      childJob: (x: number) => x * 2,
    };
    const stop = new AbortController();
    const worker = runWorker('t', { dispatch: d, registry, concurrency: 2, stop: stop.signal, claimWaitMs: 200 });
    const tracer = trace.getTracer('test');
    let parentId = '';
    const childId = await tracer.startActiveSpan('request', async (root) => {
      const h = await q.submit<string>('parentJob');
      parentId = h.id;
      const id = await h.result({ timeoutMs: 20_000 });
      root.end();
      return id;
    });
    expect(await new Handle<number>(childId, d).result({ timeoutMs: 20_000 })).toBe(42);
    expect((await d.get(childId))!.parent).toBe(parentId);
    stop.abort();
    await worker;
    await d.close();
    const spans = exporter.getFinishedSpans();
    const one = (name: string) => {
      const s = spans.filter((x) => x.name === name);
      expect(s, name).toHaveLength(1);
      return s[0]!;
    };
    const request = one('request');
    const enqParent = one('enqueue parentJob');
    const runParent = one('run parentJob');
    const enqChild = one('enqueue childJob');
    const runChild = one('run childJob');
    expect([enqParent.kind, runParent.kind, enqChild.kind, runChild.kind]).toEqual([
      SpanKind.PRODUCER,
      SpanKind.CONSUMER,
      SpanKind.PRODUCER,
      SpanKind.CONSUMER,
    ]);
    expect(parentOf(enqParent)).toBe(request.spanContext().spanId);
    expect(parentOf(runParent)).toBe(enqParent.spanContext().spanId);
    expect(parentOf(enqChild)).toBe(runParent.spanContext().spanId);
    expect(parentOf(runChild)).toBe(enqChild.spanContext().spanId);
    expect(new Set([request, enqParent, runParent, enqChild, runChild].map((s) => s.spanContext().traceId)).size).toBe(1);
    expect(runChild.attributes['messaging.message.id']).toBe(childId);
  }, 30_000);

  it('a job submitted with no trace (no traceparent in its envelope) runs in a root span of its own, which its submits join', async () => {
    const d = new Dispatch(':memory:', { namespace: 'traces-root' });
    const registry = {
      untracedParent: async () => (await new Queue('r', { dispatch: d }).submit('untracedChild')).id,
      untracedChild: () => 'ok',
    };
    const stop = new AbortController();
    const worker = runWorker('r', { dispatch: d, registry, concurrency: 2, stop: stop.signal, claimWaitMs: 200 });
    // A raw submit, as a producer with no tracing (or another language's) makes it.
    await d.submit('r', encodeEnvelope({ fn: 'untracedParent', args: [] }), { id: 'untraced-1' });
    const childId = await new Handle<string>('untraced-1', d).result({ timeoutMs: 20_000 });
    expect(await new Handle<string>(childId, d).result({ timeoutMs: 20_000 })).toBe('ok');
    stop.abort();
    await worker;
    await d.close();
    const spans = exporter.getFinishedSpans();
    const run = spans.filter((x) => x.name === 'run untracedParent');
    expect(run).toHaveLength(1);
    expect(parentOf(run[0]!)).toBeUndefined();
    const runChild = spans.find((x) => x.name === 'run untracedChild');
    expect(runChild?.spanContext().traceId).toBe(run[0]!.spanContext().traceId);
  }, 30_000);

  it("a handler's currentJob().log lines go to stderr and to the feed, with the trace they were logged in", async () => {
    const d = new Dispatch(':memory:', { namespace: 'logs' });
    const q = new Queue('t', { dispatch: d });
    const ac = new AbortController();
    const feed = d.events('t', { signal: ac.signal, kinds: ['worker'] })[Symbol.asyncIterator]();
    const stderr: string[] = [];
    const write = console.error;
    console.error = (...a: unknown[]) => void stderr.push(a.join(' '));
    const stop = new AbortController();
    const worker = runWorker('t', {
      dispatch: d,
      stop: stop.signal,
      claimWaitMs: 200,
      registry: {
        train: () => {
          currentJob().log('epoch 1 loss 0.5');
          currentJob().log('nan in grads', 'warn');
          return 'done';
        },
      },
    });
    try {
      const root = trace.getTracer('test').startSpan('request');
      const h = await context.with(trace.setSpan(context.active(), root), () => q.submit<string>('train'));
      expect(await h.result({ timeoutMs: 20_000 })).toBe('done');
      root.end();
      const got: FeedItem[] = [];
      while (got.filter((r) => r.kind === 'worker' && 'level' in r).length < 2) got.push((await feed.next()).value as FeedItem);
      const lines = got.filter((r): r is LogRecord => r.kind === 'worker' && 'level' in r);
      expect(lines.map((l) => [l.id, l.level, l.message, l.queue])).toEqual([
        [h.id, 'info', 'epoch 1 loss 0.5', 't'],
        [h.id, 'warn', 'nan in grads', 't'],
      ]);
      // The trace of the job's run span: the request's.
      expect(lines.every((l) => l.trace_id === root.spanContext().traceId)).toBe(true);
      expect(stderr).toContain(`[t/${h.id}] warn: nan in grads`);
    } finally {
      console.error = write;
      ac.abort();
      stop.abort();
      await worker;
      await d.close();
    }
  }, 30_000);

  it("runWorker onDone sees each outcome with the envelope's origin; a failure answered 'handled' fails at once, without a retry", async () => {
    const d = new Dispatch(':memory:', { namespace: 'done' });
    const q = new Queue('t', { dispatch: d });
    const seen: { job: DoneJob; state: string }[] = [];
    const stop = new AbortController();
    const worker = runWorker('t', {
      dispatch: d,
      stop: stop.signal,
      claimWaitMs: 200,
      registry: {
        charge: () => {
          throw new Error('card declined');
        },
        ok: () => 'fine',
      },
      onDone: async (job, outcome) => {
        // A success is told once the plane has the result: the job is succeeded when onDone hears it.
        const now = outcome.state === 'succeeded' ? (await d.get(job.id))!.state : outcome.state;
        seen.push({ job, state: now });
        return outcome.state === 'failed' && job.fn === 'charge' ? 'handled' : undefined;
      },
    });
    const bad = await q.submitWith({ origin: 'order-77' }, 'charge');
    const good = await q.submitWith({ origin: 'order-78' }, 'ok');
    await expect(bad.result({ timeoutMs: 20_000 })).rejects.toThrow('card declined');
    expect(await good.result({ timeoutMs: 20_000 })).toBe('fine');
    stop.abort();
    await worker;
    expect((await d.get(bad.id))!).toMatchObject({ state: 'failed', attempt: 1 }); // the queue's budget is 3: not retried
    expect(seen.map((s) => `${s.job.fn}:${s.state}:${s.job.origin}`).sort()).toEqual(['charge:failed:order-77', 'ok:succeeded:order-78']);
    await d.close();
  }, 30_000);
});
