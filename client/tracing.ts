/**
 * Traces, through `@opentelemetry/api`: a no-op unless the application registers a tracer
 * provider (and, for spans to nest across awaits, a context manager). A submit makes a PRODUCER
 * span `enqueue <fn>` and carries its context in the envelope's `traceparent`; a worker runs the
 * job in a CONSUMER span `run <fn>` whose parent is that context. A job submitted from inside a
 * running job is submitted inside its `run` span, so a cascade is one trace.
 */
import { context, ProxyTracerProvider, SpanKind, SpanStatusCode, trace, TraceFlags, type Context, type Span } from '@opentelemetry/api';
import { CLIENT_VERSION } from './version.ts';

const tracer = () => trace.getTracer('lakeshore', CLIENT_VERSION);

/** A span's context as a W3C traceparent, or null for a span that records nothing (no provider). */
export function traceparentOf(span: Span): string | null {
  const sc = span.spanContext();
  if (!trace.isSpanContextValid(sc)) return null;
  return `00-${sc.traceId}-${sc.spanId}-${sc.traceFlags & TraceFlags.SAMPLED ? '01' : '00'}`;
}

/** The remote parent a traceparent names, as a context (the active one when it names none). */
export function contextOf(traceparent: string | null): Context {
  const m = traceparent ? /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(traceparent) : null;
  if (!m) return context.active();
  return trace.setSpanContext(context.active(), { traceId: m[1]!, spanId: m[2]!, traceFlags: parseInt(m[3]!, 16), isRemote: true });
}

function failed(span: Span, e: unknown): void {
  span.recordException(e instanceof Error ? e : String(e));
  span.setStatus({ code: SpanStatusCode.ERROR, message: e instanceof Error ? e.message : String(e) });
}

/** Runs a submit in a PRODUCER span `enqueue <fn>`; `submit` gets the traceparent to put in the envelope. */
export function enqueueSpan<T>(fn: string, queue: string, submit: (traceparent: string | null) => Promise<T>): Promise<T> {
  return tracer().startActiveSpan(
    `enqueue ${fn}`,
    {
      kind: SpanKind.PRODUCER,
      attributes: { 'messaging.system': 'lakeshore', 'messaging.destination.name': queue, 'messaging.operation.type': 'send' },
    },
    async (span) => {
      try {
        return await submit(traceparentOf(span));
      } catch (e) {
        failed(span, e);
        throw e;
      } finally {
        span.end();
      }
    },
  );
}

/** True while no tracer provider is registered: spans record nothing and carry no context of their own. */
function untraced(): boolean {
  const p = trace.getTracerProvider();
  return p instanceof ProxyTracerProvider && p.getDelegateTracer('lakeshore', CLIENT_VERSION) === undefined;
}

/** runSpan's answer for a job with no trace to join and no provider to record it: nothing to do. */
const NO_SPAN = { traceId: null, within: <T>(f: () => T): T => f(), end: (_e?: unknown) => {} };

/** A job's CONSUMER span `run <fn>`, child of the submitter's traceparent: run code in it with `within`, then `end`. */
export function runSpan(fn: string, traceparent: string | null, attrs: { id: string; queue: string; attempt: number }) {
  // The span would be an invalid one in the active context: jobs submitted inside get no traceparent
  // either way. Its making cost a worker ~500 bytes a job (bench/worker-cpu.ts --heap).
  if (!traceparent && untraced()) return NO_SPAN;
  const span = tracer().startSpan(
    `run ${fn}`,
    {
      kind: SpanKind.CONSUMER,
      attributes: {
        'messaging.system': 'lakeshore',
        'messaging.destination.name': attrs.queue,
        'messaging.message.id': attrs.id,
        'lakeshore.attempt': attrs.attempt,
      },
    },
    contextOf(traceparent),
  );
  const ctx = trace.setSpan(contextOf(traceparent), span);
  const sc = span.spanContext();
  return {
    /** The trace the job runs in: its span's, else its submitter's (a traceparent with no provider here), else null. */
    traceId: trace.isSpanContextValid(sc) ? sc.traceId : (traceparent && /^00-([0-9a-f]{32})-/.exec(traceparent)?.[1]) || null,
    within: <T>(f: () => T): T => context.with(ctx, f),
    end: (e?: unknown) => {
      if (e !== undefined) failed(span, e);
      span.end();
    },
  };
}
