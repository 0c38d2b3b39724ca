/** The CLI's commands for operators: listing, retry and redrive, pause and resume, queue settings, cron schedules. */
import { callOf, callText, encodeEnvelope, NEVER } from '../envelope.ts';
import { isState, STATES } from '../../src/core/states.ts';
import type { DispatchPlane, InvocationSummary, QueueInfo, Schedule, SettingsChange } from '../types.ts';
import { EXIT, type Out } from './output.ts';
import { parseJson, parseKwargs, UsageError } from './usage.ts';
import { noInvocation } from '../../src/core/errors.ts';
import { PUSH_BACKOFF } from '../../src/core/push-port.ts';
import type { Backoff } from '../../src/core/types.ts';

const backoffText = (b: Backoff) => `${b.initialMs} ms x${b.factor} up to ${b.maxMs} ms, jitter ${b.jitter}`;

const num = (what: string, s: string | undefined): number | undefined => {
  if (s === undefined) return undefined;
  const n = Number(s);
  if (!Number.isFinite(n)) throw new UsageError(`${what} must be a number, got ${JSON.stringify(s)}`);
  return n;
};
/** A setting flag: a number, or "none" to clear the setting. */
const setting = (what: string, s: string | undefined): number | null | undefined => (s === 'none' ? null : num(what, s));

/** `lakeshore ls <queue> --state failed`: one page of the queue's jobs in a state; `--cursor` for the next. */
export async function ls(d: DispatchPlane, out: Out, queue: string, f: { state: string; limit?: string; cursor?: string }) {
  if (!isState(f.state)) throw new UsageError(`--state must be one of ${STATES.join(', ')}, got ${JSON.stringify(f.state)}`);
  const page = await d.list(queue, { state: f.state, limit: num('--limit', f.limit), cursor: f.cursor ?? null });
  if (out.json) {
    out.print({ queue, state: f.state, items: page.items, cursor: page.cursor });
    return EXIT.ok;
  }
  const lines = page.items.map((i) => jobLine(i));
  if (page.cursor) lines.push(`more: lakeshore ls ${queue} --state ${f.state} --cursor ${page.cursor}`);
  out.print(page, lines.join('\n') || `no ${f.state} jobs in ${queue}`);
  return EXIT.ok;
}

/** A job on a line, as `ls` shows it (with its queue, where jobs of many queues are shown). */
function jobLine(i: InvocationSummary, queue = false): string {
  const when = (ms: number | null) => (ms === null ? '-' : new Date(ms).toISOString());
  return [i.id, ...(queue ? [i.queue] : []), i.state, `attempt ${i.attempt}`, when(i.finishedAt ?? i.updatedAt), i.error?.message ?? '']
    .join('  ')
    .trimEnd();
}

/** Several jobs, a line each (`get ID ID ...`), read 1,000 at a time; an id the plane does not have says so (exit 3). */
export async function getMany(d: DispatchPlane, out: Out, ids: string[]) {
  const every = [...new Set(ids)];
  let missing = 0;
  for (let i = 0; i < every.length; i += 1000) {
    const part = every.slice(i, i + 1000);
    const rows = await d.getMany(part);
    part.forEach((id, k) => {
      const row = rows[k];
      if (row) out.print(row, jobLine(row, true));
      else {
        missing++;
        out.print({ id, error: { code: 'not_found', message: noInvocation(id) } }, `${id}  not found`);
      }
    });
  }
  return missing ? EXIT.notFound : EXIT.ok;
}

export async function retry(d: DispatchPlane, out: Out, id: string) {
  await d.retry(id);
  out.print({ id, retried: true }, `${id}: back in its queue`);
  return EXIT.ok;
}

export async function redrive(d: DispatchPlane, out: Out, queue: string, f: { limit?: string; deadLetters?: boolean }) {
  const back = await d.redrive(queue, { limit: num('--limit', f.limit), deadLetters: !!f.deadLetters });
  out.print({ queue, redriven: back }, back.length ? back.map((b) => `${b.id} -> ${b.queue}`).join('\n') : 'nothing to redrive');
  return EXIT.ok;
}

export async function pause(d: DispatchPlane, out: Out, queue: string, paused: boolean) {
  await (paused ? d.pauseQueue(queue) : d.resumeQueue(queue));
  out.print({ queue, paused }, `${queue}: ${paused ? 'paused' : 'resumed'}`);
  return EXIT.ok;
}

export interface QueueFlags {
  leaseMs?: string;
  maxAttempts?: string;
  maxRunning?: string;
  rate?: string;
  backoff?: string;
  deadLetterQueue?: string;
  ttlMs?: string;
  retentionMs?: string;
  journalRetentionMs?: string;
  timeLimitMs?: string;
  pushUrl?: string;
  pushConcurrency?: string;
  pushTimeoutMs?: string;
  pushBatchSize?: string;
  rotatePushSecret?: boolean;
}

/** The push target the flags set: --push-url none turns it off; the other push flags need the URL (kept from the queue's target). */
async function pushChange(d: DispatchPlane, name: string, f: QueueFlags): Promise<SettingsChange['push']> {
  if (f.pushUrl === 'none') return null;
  const url = f.pushUrl ?? (await d.queueInfo(name)).settings.push?.url;
  if (!url)
    throw new UsageError(
      '--push-concurrency, --push-timeout-ms, --push-batch-size and --rotate-push-secret change a push target: give --push-url too',
    );
  return {
    url,
    ...(f.pushConcurrency !== undefined ? { concurrency: num('--push-concurrency', f.pushConcurrency) } : {}),
    ...(f.pushTimeoutMs !== undefined ? { timeoutMs: num('--push-timeout-ms', f.pushTimeoutMs) } : {}),
    ...(f.pushBatchSize !== undefined ? { batchSize: num('--push-batch-size', f.pushBatchSize) } : {}),
    ...(f.rotatePushSecret ? { rotateSecret: true } : {}),
  };
}

/** `queue <name>` shows the settings; with flags it changes those named first ("none" clears one). */
export async function queue(d: DispatchPlane, out: Out, name: string, f: QueueFlags) {
  const change: SettingsChange = {};
  if (f.leaseMs !== undefined) change.leaseMs = setting('--lease-ms', f.leaseMs);
  if (f.maxAttempts !== undefined) change.maxAttempts = setting('--max-attempts', f.maxAttempts);
  if (f.maxRunning !== undefined) change.maxRunning = setting('--max-running', f.maxRunning);
  if (f.rate !== undefined) change.claimsPerSecond = setting('--rate', f.rate);
  if (f.ttlMs !== undefined) change.ttlMs = setting('--ttl-ms', f.ttlMs);
  if (f.retentionMs !== undefined) change.retentionMs = setting('--retention-ms', f.retentionMs);
  if (f.journalRetentionMs !== undefined) change.journalRetentionMs = setting('--journal-retention-ms', f.journalRetentionMs);
  if (f.timeLimitMs !== undefined) change.timeLimitMs = setting('--time-limit-ms', f.timeLimitMs);
  if (f.deadLetterQueue !== undefined) change.deadLetterQueue = f.deadLetterQueue === 'none' ? null : f.deadLetterQueue;
  if (
    f.pushUrl !== undefined ||
    f.pushConcurrency !== undefined ||
    f.pushTimeoutMs !== undefined ||
    f.pushBatchSize !== undefined ||
    f.rotatePushSecret
  )
    change.push = await pushChange(d, name, f);
  if (f.backoff !== undefined) {
    // --backoff INITIAL_MS[,FACTOR[,MAX_MS[,JITTER]]] or none
    const [initialMs, factor, maxMs, jitter] = f.backoff === 'none' ? [] : f.backoff.split(',').map((p) => num('--backoff', p));
    change.retryBackoff = f.backoff === 'none' ? null : { initialMs, factor, maxMs, jitter };
  }
  const info: QueueInfo = Object.keys(change).length ? await d.configureQueue(name, change) : await d.queueInfo(name);
  const s = info.settings;
  const b = s.retryBackoff;
  out.print(
    info,
    [
      `queue            ${info.queue}${info.paused ? ' (paused)' : ''}`,
      `lease            ${s.leaseMs === null ? 'plane default' : `${s.leaseMs} ms`}`,
      `max attempts     ${s.maxAttempts ?? 'plane default'}`,
      `max running      ${s.maxRunning ?? 'no cap'}`,
      `claims/s         ${s.claimsPerSecond ?? 'no limit'}`,
      `retry backoff    ${b ? backoffText(b) : s.push ? `none: its deliveries wait the push backoff, ${backoffText(PUSH_BACKOFF)}` : 'none'}`,
      `dead letters to  ${s.deadLetterQueue ?? 'none'}`,
      `default ttl      ${s.ttlMs === null ? 'none' : `${s.ttlMs} ms`}`,
      `retention        ${s.retentionMs === null ? 'plane default (7 days)' : `${s.retentionMs} ms`}`,
      `frames kept      ${s.journalRetentionMs === null ? 'as long as their job' : `${s.journalRetentionMs} ms after it finished`}`,
      `time limit       ${s.timeLimitMs === null ? "the worker's (600 s by default)" : `${s.timeLimitMs} ms`}`,
      `push             ${s.push ? `${s.push.url}, ${s.push.concurrency} at once, ${s.push.timeoutMs} ms each${s.push.batchSize > 1 ? `, up to ${s.push.batchSize} jobs in one` : ''}` : 'none (workers pull)'}`,
      ...(s.push?.secret
        ? [
            `push secret      ${s.push.secret}`,
            '                 (shown this once: give it to the receiver, which verifies each delivery with it)',
          ]
        : s.push
          ? ['push secret      not shown again (it was shown once, when made); --rotate-push-secret makes a new one']
          : []),
    ].join('\n'),
  );
  return EXIT.ok;
}

const scheduleLine = (s: Schedule) =>
  [
    s.name.padEnd(20),
    s.cron.padEnd(18),
    (s.timezone ?? 'UTC').padEnd(16),
    callText(s.envelope),
    ...(s.priority ? [`priority ${s.priority}`] : []),
    s.nextAt >= NEVER ? 'next never (a cron this plane cannot read: set it again)' : `next ${new Date(s.nextAt).toISOString()}`,
    ...(s.lastAt === null ? [] : [`last ${new Date(s.lastAt).toISOString()}`]),
  ].join('  ');

/** A schedule as `--json` prints it: its call decoded, not its envelope's bytes. */
const scheduleView = ({ envelope, ...s }: Schedule) => ({ ...s, call: callOf(envelope) });

export async function schedule(
  d: DispatchPlane,
  out: Out,
  action: string,
  queue: string,
  name: string | undefined,
  f: { cron?: string; tz?: string; fn?: string; args?: string; kwargs?: string; priority?: string },
) {
  if (action === 'list') {
    const all = await d.listSchedules(queue);
    out.print({ queue, schedules: all.map(scheduleView) }, all.length ? all.map(scheduleLine).join('\n') : `${queue}: no schedules`);
    return EXIT.ok;
  }
  if (!name) throw new UsageError(`schedule ${action} needs a schedule name`);
  if (action === 'rm') {
    await d.removeSchedule(queue, name);
    out.print({ queue, name, removed: true }, `${queue}/${name}: removed`);
    return EXIT.ok;
  }
  if (action !== 'set') throw new UsageError(`unknown schedule action ${JSON.stringify(action)}: expected set, list or rm`);
  if (!f.cron || !f.fn) throw new UsageError('schedule set needs --cron and --fn');
  const args = parseJson('--args', f.args, []);
  const envelope = encodeEnvelope({ fn: f.fn, args: Array.isArray(args) ? args : [args], kwargs: parseKwargs(f.kwargs) });
  const s = await d.setSchedule(queue, name, {
    cron: f.cron,
    timezone: f.tz ?? null,
    envelope,
    priority: num('--priority', f.priority) ?? 0,
  });
  out.print(scheduleView(s), scheduleLine(s));
  // The edge plane's queue object fires ticks by itself; a local file has no process of its own.
  if (d.inProcess && !out.json) {
    // A push queue's jobs go out through `lakeshore push`, which has the file open too.
    const pushed = (await d.queueInfo(queue)).settings.push;
    const by = pushed ? `its pusher (lakeshore push ${queue})` : `a worker of ${queue} (lakeshore worker start --queue ${queue})`;
    process.stderr.write(`lakeshore: on the local plane a tick submits while a process has the file open: ${by} fires them\n`);
  }
  return EXIT.ok;
}

export async function del(d: DispatchPlane, out: Out, id: string) {
  await d.delete(id);
  out.print({ id, deleted: true }, `${id}: deleted`);
  return EXIT.ok;
}

const PURGEABLE = ['succeeded', 'failed', 'cancelled'] as const;

/**
 * `lakeshore purge QUEUE --state failed`: deletes the queue's finished jobs of a state (or of all
 * three: `--state finished`), in batches, after a confirmation: asked on a terminal, `--yes`
 * elsewhere. Jobs that finish while it runs may go too; nothing unfinished ever does.
 */
export async function purge(
  d: DispatchPlane,
  out: Out,
  queue: string,
  f: { state: string; yes?: boolean },
  ask: (question: string) => Promise<boolean>,
) {
  const states = f.state === 'finished' ? [...PURGEABLE] : PURGEABLE.filter((s) => s === f.state);
  if (!states.length)
    throw new UsageError(`--state must be one of ${[...PURGEABLE, 'finished'].join(', ')}, got ${JSON.stringify(f.state)}`);
  const counts = await Promise.all(states.map((s) => d.count(queue, s)));
  const total = counts.reduce((a, b) => a + b, 0);
  const what = states.map((s, i) => `${counts[i]} ${s}`).join(', ');
  if (!total) {
    out.print({ queue, purged: 0 }, `nothing to purge: ${what} in ${queue}`);
    return EXIT.ok;
  }
  if (!f.yes && !(await ask(`delete ${what} job(s) of queue ${queue}, with their frames? This cannot be undone. [y/N] `))) {
    out.print({ queue, purged: 0, confirmed: false }, 'not confirmed: nothing deleted');
    return EXIT.failed;
  }
  const limit = 1000;
  let purged = 0;
  for (const state of states) {
    for (;;) {
      const n = await d.purge(queue, { state, limit });
      purged += n;
      out.status(`purging ${queue}: ${purged} deleted`);
      if (n < limit) break;
    }
  }
  out.print({ queue, purged }, `${queue}: ${purged} job(s) deleted`);
  return EXIT.ok;
}
