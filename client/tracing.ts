/**
 * Traces, through `@opentelemetry/api`: a no-op unless the application registers a tracer
 * provider (and, for spans to nest across awaits, a context manager). A submit makes a PRODUCER
 * span `enqueue <fn>` and carries its context in the envelope's `traceparent`; a worker runs the
 * job in a CONSUMER span `run <fn>` whose parent is that context. A job submitted from inside a
 * running job is submitted inside its `run` span, so a cascade is one trace.
 */
import {
  context,
  createContextKey,
  INVALID_SPAN_CONTEXT,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Context,
  type Span,
} from '@opentelemetry/api';
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
  // No provider to record the span, and no span around this submit to hand on: it would carry nothing.
  if (nothingToTrace()) return submit(null);
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

/** True while no tracer provider is registered: spans record nothing. */
function untraced(): boolean {
  const p = trace.getTracerProvider();
  return p instanceof ProxyTracerProvider && p.getDelegateTracer('lakeshore', CLIENT_VERSION) === undefined;
}

const PROBE = ROOT_CONTEXT.setValue(createContextKey('lakeshore probe'), true);
const probed = () => context.active() === PROBE;
/** True while no context manager is registered: a context given to `context.with` is not kept. */
const contextless = (): boolean => !context.with(PROBE, probed);

/** True when a span made now would be a non-recording one with no parent: nothing to record or hand on. */
const nothingToTrace = (): boolean =>
  untraced() && !trace.isSpanContextValid(trace.getSpanContext(context.active()) ?? INVALID_SPAN_CONTEXT);

const traceIdOf = (traceparent: string | null): string | null => (traceparent && /^00-([0-9a-f]{32})-/.exec(traceparent)?.[1]) || null;
const direct = <T>(f: () => T): T => f();
const noEnd = (_e?: unknown) => {};

/** A job's CONSUMER span `run <fn>`, child of the submitter's traceparent: run code in it with `within`, then `end`. */
export function runSpan(fn: string, traceparent: string | null, attrs: { id: string; queue: string; attempt: number }) {
  // With no provider the span would record nothing, and with no context manager either (or no
  // trace to join) its context would reach nothing the job does: the job's own submits get no
  // parent from it. Making it anyway cost a worker about 5 µs a job (bench/worker-cpu.ts).
  if (untraced() && (!traceparent || contextless())) return { traceId: traceIdOf(traceparent), within: direct, end: noEnd };
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
    traceId: trace.isSpanContextValid(sc) ? sc.traceId : traceIdOf(traceparent),
    within: <T>(f: () => T): T => context.with(ctx, f),
    end: (e?: unknown) => {
      if (e !== undefined) failed(span, e);
      span.end();
    },
  };
}
