/** The commands on one job: submit, get, result, tail and cancel. */
import { FrameKind, FRAME_KIND_NAMES } from '../../src/core/frame.ts';
import type { JournalFrame } from '../../src/core/types.ts';
import { callOf, callText, decodeEnvelope, encodeEnvelope, newTraceparent } from '../envelope.ts';
import { jobId } from '../ids.ts';
import { errorShown, InvocationCancelledError, InvocationFailedError, NotFoundError, TimeoutError } from '../errors.ts';
import { HttpDispatch } from '../http/dispatch.ts';
import type { DispatchPlane } from '../types.ts';
import { elapsed, EXIT, type Out } from './output.ts';
import { parseJson, parseKwargs, UsageError } from './usage.ts';
import { endOf, safeJson } from './results.ts';
import { quietQueue, quietQueueMs } from './watch.ts';
import { noInvocation } from '../../src/core/errors.ts';

export async function submit(
  d: DispatchPlane,
  out: Out,
  queue: string,
  fn: string,
  argsJson: string | undefined,
  f: {
    id?: string;
    key?: string;
    priority?: string;
    kwargs?: string;
    module?: string;
    timeLimitMs?: string;
    maxRetries?: string;
    maxAttempts?: string;
    delayMs?: string;
    ttlMs?: string;
    code?: string;
  },
) {
  const args = parseJson('ARGS', argsJson, []);
  let code: string | null = f.code ?? null;
  if (code === 'push') {
    if (!(d instanceof HttpDispatch))
      throw new UsageError("--code push needs the edge plane (--url): a local plane runs this machine's code already");
    code = (await d.pushCode()).stamp; // this directory's git tree, uploaded once per tree
  }
  const list = Array.isArray(args) ? args : [args];
  const kwargs = parseKwargs(f.kwargs);
  const envelope = encodeEnvelope({
    fn,
    args: list,
    kwargs,
    module: f.module ?? null,
    traceparent: newTraceparent(),
    time_limit_ms: f.timeLimitMs ? Number(f.timeLimitMs) : null,
    max_retries: f.maxRetries ? Number(f.maxRetries) : null,
    code,
  });
  const n = (v: string | undefined) => (v === undefined ? undefined : Number(v));
  const id = await d.submit(queue, envelope, {
    id: f.id ?? jobId(),
    key: f.key,
    priority: n(f.priority),
    maxAttempts: n(f.maxAttempts),
    delayMs: n(f.delayMs),
    ttlMs: n(f.ttlMs),
  });
  out.print({ id, queue, fn }, id);
  return EXIT.ok;
}

export async function get(d: DispatchPlane, out: Out, id: string) {
  const inv = await d.get(id);
  if (!inv) throw new NotFoundError(noInvocation(id));
  let call: unknown = null;
  try {
    call = decodeEnvelope(inv.envelope);
  } catch {
    call = null;
  }
  const view = {
    id: inv.id,
    queue: inv.queue,
    state: inv.state,
    attempt: inv.attempt,
    priority: inv.priority,
    key: inv.key,
    parent: inv.parent,
    worker_id: inv.workerId,
    lease_until: inv.leaseUntil,
    call,
    result: safeJson(inv.result),
    error: inv.error,
    created_at: inv.createdAt,
    started_at: inv.startedAt,
    finished_at: inv.finishedAt,
    run_at: inv.runAt,
    expires_at: inv.expiresAt,
    max_attempts: inv.maxAttempts,
  };
  // Text shows moments as ISO times (JSON keeps epoch ms).
  const moments = new Set(['lease_until', 'created_at', 'started_at', 'finished_at', 'run_at', 'expires_at']);
  const text = (k: string, v: unknown) =>
    moments.has(k)
      ? new Date(Number(v)).toISOString()
      : k === 'error' && v && typeof v === 'object'
        ? errorText(v)
        : typeof v === 'object'
          ? JSON.stringify(v)
          : String(v);
  const lines = Object.entries(view).flatMap(([k, v]): [string, string][] =>
    k === 'call' ? callLines(inv.envelope) : v === null ? [] : [[k, text(k, v)]],
  );
  out.print(view, lines.map(([k, v]) => `${k.padEnd(12)} ${v}`).join('\n'));
  return EXIT.ok;
}

/**
 * The call as the dashboard and `schedule list` write it (`train({"epochs":3}, lr=0.01)`), whole,
 * then each other field its envelope sets (module, code, traceparent, limits) on a line of its own.
 */
function callLines(envelope: Uint8Array): [string, string][] {
  const { fn: _fn, args: _args, kwargs: _kwargs, ...rest } = callOf(envelope) ?? {};
  return [
    ['call', callText(envelope, Number.POSITIVE_INFINITY)],
    ...Object.entries(rest).map(([k, v]): [string, string] => [k, String(v)]),
  ];
}

/** A failure as a person reads it: its type and message, then its stack, a line each. */
function errorText(e: object): string {
  const { head, stack } = errorShown(e);
  return stack ? [head, ...stack.split('\n').map((l) => `${' '.repeat(13)}${l}`)].join('\n') : head;
}

/** Waits for the result. On a TTY a status line shows the elapsed time and the state. */
export async function result(d: DispatchPlane, out: Out, id: string, timeoutS: number, env: NodeJS.ProcessEnv = process.env) {
  const t0 = Date.now();
  const deadline = timeoutS > 0 ? t0 + timeoutS * 1000 : Infinity;
  const quietMs = quietQueueMs(env);
  const quiet = quietQueue(d, id, quietMs);
  try {
    await quiet(); // the quiet span starts now
    for (;;) {
      // Waits in slices: a status line each second on a terminal, and a look at the queue each quiet span.
      const slice = out.tty ? 1_000 : Math.min(deadline - Date.now(), 300_000, quietMs / 2);
      try {
        const bytes = await d.result(id, { timeoutMs: Math.max(0, Math.min(slice, deadline - Date.now())) });
        return said(out, endOf(id, { id, ok: true, result: bytes }));
      } catch (e) {
        if (!(e instanceof TimeoutError) || Date.now() >= deadline) throw e;
        const said = await quiet();
        if (said) {
          out.clearStatus();
          process.stderr.write(`lakeshore: ${said}\n`);
        }
        if (out.tty) {
          const inv = await d.get(id);
          out.status(`waiting for ${id}: ${inv?.state ?? '?'} (attempt ${inv?.attempt ?? 0}), ${elapsed(t0)}`);
        }
      }
    }
  } catch (e) {
    return reportEnd(out, id, e);
  }
}

function reportEnd(out: Out, id: string, e: unknown): number {
  if (e instanceof TimeoutError) return said(out, endOf(id, e));
  if (e instanceof InvocationFailedError || e instanceof InvocationCancelledError) return said(out, endOf(id, { id, ok: false, error: e }));
  throw e;
}

function said(out: Out, end: { value: unknown; human: string; code: number }): number {
  out.print(end.value, end.human);
  return end.code;
}

/** Prints frames as they are written; the client reconnects from its cursor by itself. */
export async function tail(d: DispatchPlane, out: Out, id: string, since: number) {
  const t0 = Date.now();
  let attempt = 0;
  // CHUNK frames are raw output (tokens, log lines): written as they are, a character split
  // between two frames decoded whole, and a line of them ended before anything else is said.
  const raw = new TextDecoder();
  let midLine = false;
  const line = (s: string) => {
    if (midLine) out.raw(`${raw.decode()}\n`);
    midLine = false;
    out.print(s);
  };
  const show = (f: JournalFrame) => {
    if (out.json)
      return out.print({
        seq: f.seq,
        kind: FRAME_KIND_NAMES[f.kind],
        attempt: f.attempt,
        body: renderBody(f),
        meta: f.meta,
        final: f.final,
      });
    if (f.attempt !== attempt) {
      attempt = f.attempt;
      if (f.kind !== FrameKind.BEGIN) line(`── attempt ${f.attempt} ──`);
    }
    if (f.kind === FrameKind.BEGIN) line(`── attempt ${f.attempt} ──`);
    else if (f.kind === FrameKind.END) line('── end ──');
    else if (f.kind === FrameKind.ERROR) {
      const e = renderBody(f) as { message?: string; type?: string } | string;
      line(`!! ${typeof e === 'object' && e ? `${e.type ?? 'Error'}: ${e.message}` : String(e)}`);
    } else if (f.kind === FrameKind.CHUNK) {
      const text = raw.decode(f.body, { stream: true });
      if (text) out.raw(text);
      // Bytes held for a character's rest leave the line open too.
      midLine = text ? !text.endsWith('\n') : midLine || f.body.length > 0;
    } else line(JSON.stringify(renderBody(f)));
  };
  let state = '…';
  const ticker = out.tty
    ? setInterval(() => {
        // A status line would be drawn over (and then clear) a line of raw output still open.
        if (!midLine) out.status(`tailing ${id}: ${state}, ${elapsed(t0)}`);
        void d
          .get(id)
          .then((inv) => {
            if (inv) state = `${inv.state} (attempt ${inv.attempt})`;
          })
          .catch(() => {});
      }, 1_000)
    : undefined;
  try {
    for await (const f of d.journalRead(id, { since })) {
      out.clearStatus();
      show(f);
    }
  } finally {
    clearInterval(ticker);
    out.clearStatus();
  }
  // The stream can end at a final frame a moment before the worker's ack lands: give it a moment.
  await d.result(id, { timeoutMs: 2_000 }).catch(() => null);
  const inv = await d.get(id);
  if (!out.json) line(`${id}: ${inv?.state ?? 'unknown'}`);
  return inv?.state === 'succeeded' || inv?.state === 'running' || inv?.state === 'queued'
    ? EXIT.ok
    : inv?.state === 'cancelled'
      ? EXIT.cancelled
      : EXIT.failed;
}

const renderBody = (f: JournalFrame) => {
  if (f.kind === FrameKind.CHUNK) return new TextDecoder().decode(f.body);
  return safeJson(f.body);
};

export async function cancel(d: DispatchPlane, out: Out, id: string) {
  const cancelled = await d.cancel(id);
  out.print({ id, cancelled }, cancelled ? `${id}: cancelled` : `${id}: already ended, nothing to cancel`);
  return EXIT.ok;
}
