/** Queue-scoped routes: the overview, submit, claim, ack and nack in batches, count, listing, settings. */
import { Hono } from 'hono';
import { raise } from '../../core/settled.ts';
import type * as z from 'zod/mini';
import {
  AckManyBody,
  ClaimBody,
  ClaimCancelBody,
  ReleaseBody,
  WorkerLogBody,
  NackManyBody,
  QueueSettingsBody,
  ResultsBody,
  RedriveBody,
  PurgeBody,
  ScheduleBody,
  SubmitBody,
  SubmitManyBody,
} from '../../core/wire.ts';
import type { QueueInfo, Schedule } from '../../core/types.ts';
import type { ResultsAnswer } from '../../core/results.ts';
import { jsonBody, MAX_BATCH_BODY_BYTES, numParam } from '../body.ts';
import {
  claimedJson,
  endedJson,
  itemJson,
  overviewJson,
  pageOfJson,
  queueInfoJson,
  scheduleJson,
  storageJson,
} from '../../core/wire-json.ts';
import { limitsOf, liveOverview, noteBookmark, queueObject, queueParam, reader, type App } from '../plane.ts';
import { logLines } from '../../core/feed.ts';
import { allow, may } from '../auth.ts';
import { longPoll } from '../long-poll.ts';
import { submitOne } from '../submit-lane.ts';
import { queuesAsked } from '../queue-pages.ts';
import * as v from '../../core/validate.ts';

const acked = (r: { absorbed: boolean }) => ({ ok: true, absorbed: r.absorbed });

/** A submit body, as the engine takes it. */
const submitRequest = (b: z.output<typeof SubmitBody>) => ({
  id: b.id,
  envelope: b.envelope,
  key: b.key,
  priority: b.priority,
  parent: b.parent,
  delayMs: b.delay_ms,
  runAt: b.run_at,
  ttlMs: b.ttl_ms,
  expiresAt: b.expires_at,
  maxAttempts: b.max_attempts,
});
const nacked = (r: { state: string; absorbed: boolean }) => ({ ok: true, state: r.state, absorbed: r.absorbed });

/** A claim's wait id in its queue object: the worker's own claim_id, else a fresh one. */
const claimWaitId = (workerId: string, claimId: string | null | undefined) =>
  claimId === undefined || claimId === null ? crypto.randomUUID() : `${v.workerId(workerId)}\u0000${v.text('claim_id', claimId, 200)}`;

export const queues = new Hono<App>()
  .get('/', may('queues'), async (c) => {
    const { ns } = c.var;
    const { queues, next } = await queuesAsked(c, ns);
    const [overview, storage] = await Promise.all([liveOverview(c, ns, queues), reader(c, ns).then((r) => r.storageState())]);
    return c.json({ queues: overview.map((q) => overviewJson(q.overview)), storage: storageJson(storage), next });
  })
  .get('/:queue/invocations', may('list'), async (c) =>
    c.json(
      pageOfJson(
        await (await reader(c, c.var.ns)).list(
          c.var.ns,
          queueParam(c),
          c.req.query('state') ?? 'queued',
          numParam(c, 'limit'),
          c.req.query('cursor'),
        ),
      ),
    ),
  )
  .post('/:queue/invocations', may('submit'), jsonBody(SubmitBody), async (c) => {
    const answer = await submitOne(c, c.var.ns, queueParam(c), submitRequest(c.req.valid('json')));
    noteBookmark(c, answer);
    const out = await raise(answer);
    return c.json(out, out.created ? 201 : 200);
  })
  .post('/:queue/invocations/batch', may('submit'), jsonBody(SubmitManyBody, MAX_BATCH_BODY_BYTES), async (c) => {
    const out = await raise(queueObject(c, c.var.ns, queueParam(c)).submitMany(c.req.valid('json').items.map(submitRequest)));
    return c.json({ results: out.map((r) => itemJson(r, (v) => v)) });
  })
  .post('/:queue/claim', may('claim'), jsonBody(ClaimBody, MAX_BATCH_BODY_BYTES), async (c) => {
    const { ns } = c.var;
    const queue = queueParam(c);
    const b = c.req.valid('json');
    const req = {
      workerId: b.worker_id,
      kind: b.kind,
      temperature: b.temperature,
      leaseMs: b.lease_ms,
      waitMs: b.wait_ms,
      max: b.max,
      worker: b.worker,
    };
    const stub = queueObject(c, ns, queue);
    if (!b.acks) {
      // A claim that waits streams (long-poll.ts), so a client that goes away is noticed: parked,
      // its claim leaves the queue; just answered, its jobs go back. A claim_id lets the client
      // call it off itself (below), where no disconnect reaches the plane.
      const waitId = claimWaitId(b.worker_id, b.claim_id);
      const answer = raise(stub.claim(req, waitId)).then((a) => ({ value: a.claimed, parked: a.parked }));
      if (!b.wait_ms) return c.json({ claimed: (await answer).value.map(claimedJson) });
      return longPoll(
        c,
        answer,
        (got) => ({ claimed: got.map(claimedJson) }),
        () => stub.abortWait(waitId),
      );
    }
    allow(c, ns, 'ack', queue);
    const acks = b.acks.map((a) => ({ id: a.id, workerId: b.worker_id, attempt: a.attempt, result: a.result }));
    const out = await raise(stub.ackAndClaim(acks, req));
    return c.json({ claimed: out.claimed.map(claimedJson), acks: out.acks.map((r) => itemJson(r, acked)) });
  })
  .post('/:queue/results', may('result'), jsonBody(ResultsBody), async (c) => {
    const b = c.req.valid('json');
    const stub = queueObject(c, c.var.ns, queueParam(c));
    // It streams while it waits (long-poll.ts), so a wait whose client left (a client's shared
    // waits, merged into another call) is called off, with its waiters, not left to its timeout.
    const waitId = crypto.randomUUID();
    const answer = raise<ResultsAnswer>(stub.results(b.ids, b.timeout_ms ?? undefined, waitId, b.after)).then((value) => ({
      value,
      parked: false,
    }));
    return longPoll(
      c,
      answer,
      (a) => ({ results: a.ended.map(endedJson), cursor: a.cursor }),
      () => stub.abortWait(waitId),
      0,
    );
  })
  .post('/:queue/workers/:worker/stop', may('claim'), async (c) => {
    const id = v.workerId(c.req.param('worker'));
    return c.json({ stopped: await queueObject(c, c.var.ns, queueParam(c)).workerStopped(id) });
  })
  .post('/:queue/workers/:worker/log', may('claim'), jsonBody(WorkerLogBody), async (c) => {
    const id = v.workerId(c.req.param('worker'));
    const lines = logLines(c.req.valid('json').lines, limitsOf(c));
    await queueObject(c, c.var.ns, queueParam(c)).workerLog(id, lines);
    return c.json({ told: lines.length });
  })
  .post('/:queue/claim/cancel', may('claim'), jsonBody(ClaimCancelBody), async (c) => {
    const b = c.req.valid('json');
    const waitId = claimWaitId(b.worker_id, b.claim_id);
    return c.json({ cancelled: await queueObject(c, c.var.ns, queueParam(c)).abortWait(waitId) });
  })
  .post('/:queue/release', may('nack'), jsonBody(ReleaseBody, MAX_BATCH_BODY_BYTES), async (c) => {
    // Jobs a worker claimed and never started, back to the queue uncharged (a worker stopping).
    const b = c.req.valid('json');
    return c.json({ released: await raise(queueObject(c, c.var.ns, queueParam(c)).release(b.worker_id, b.items)) });
  })
  .post('/:queue/ack', may('ack'), jsonBody(AckManyBody, MAX_BATCH_BODY_BYTES), async (c) => {
    const items = c.req.valid('json').items.map((a) => ({ id: a.id, workerId: a.worker_id, attempt: a.attempt, result: a.result }));
    const out = await raise(queueObject(c, c.var.ns, queueParam(c)).ackMany(items));
    return c.json({ results: out.map((r) => itemJson(r, acked)) });
  })
  .post('/:queue/nack', may('nack'), jsonBody(NackManyBody, MAX_BATCH_BODY_BYTES), async (c) => {
    const items = c.req.valid('json').items.map((n) => ({
      id: n.id,
      workerId: n.worker_id,
      attempt: n.attempt,
      error: n.error,
      retry: n.retry,
      delayMs: n.delay_ms,
      maxAttempts: n.max_attempts,
    }));
    const out = await raise(queueObject(c, c.var.ns, queueParam(c)).nackMany(items));
    return c.json({ results: out.map((r) => itemJson(r, nacked)) });
  })
  .get('/:queue/count', may('count'), async (c) =>
    c.json({ count: await (await reader(c, c.var.ns)).count(c.var.ns, queueParam(c), c.req.query('state')) }),
  )
  .get('/:queue', may('queues'), async (c) => c.json(queueInfoJson(await raise<QueueInfo>(queueObject(c, c.var.ns, queueParam(c)).info()))))
  .put('/:queue', may('configure'), jsonBody(QueueSettingsBody), async (c) => {
    const b = c.req.valid('json');
    const backoff = b.retry_backoff && {
      initialMs: b.retry_backoff.initial_ms,
      factor: b.retry_backoff.factor,
      maxMs: b.retry_backoff.max_ms,
      jitter: b.retry_backoff.jitter,
    };
    const info = await raise<QueueInfo>(
      queueObject(c, c.var.ns, queueParam(c)).configure({
        leaseMs: b.lease_ms,
        maxAttempts: b.max_attempts,
        maxRunning: b.max_running,
        claimsPerSecond: b.claims_per_second,
        retryBackoff: backoff,
        deadLetterQueue: b.dead_letter_queue,
        ttlMs: b.ttl_ms,
        retentionMs: b.retention_ms,
        journalRetentionMs: b.journal_retention_ms,
        timeLimitMs: b.time_limit_ms,
        push: b.push && {
          url: b.push.url,
          concurrency: b.push.concurrency ?? undefined,
          timeoutMs: b.push.timeout_ms ?? undefined,
          batchSize: b.push.batch_size ?? undefined,
          rotateSecret: b.push.rotate_secret ?? undefined,
        },
      }),
    );
    return c.json(queueInfoJson(info));
  })
  .post('/:queue/pause', may('pause'), async (c) => {
    await raise(queueObject(c, c.var.ns, queueParam(c)).pause());
    return c.json({ paused: true });
  })
  .post('/:queue/resume', may('pause'), async (c) => {
    await raise(queueObject(c, c.var.ns, queueParam(c)).resume());
    return c.json({ paused: false });
  })
  .post('/:queue/redrive', may('redrive'), jsonBody(RedriveBody), async (c) => {
    const b = c.req.valid('json');
    const stub = queueObject(c, c.var.ns, queueParam(c));
    if (b.dead_letters) return c.json({ redriven: await raise<{ id: string; queue: string }[]>(stub.redriveDeadLetters(b.limit)) });
    return c.json({ redriven: (await raise<string[]>(stub.redrive(b.limit))).map((id) => ({ id, queue: queueParam(c) })) });
  })
  .post('/:queue/purge', may('purge'), jsonBody(PurgeBody), async (c) => {
    const b = c.req.valid('json');
    return c.json({ purged: await raise<number>(queueObject(c, c.var.ns, queueParam(c)).purgeFinished(b.state, b.limit)) });
  })
  .get('/:queue/schedules', may('schedules'), async (c) =>
    c.json({ schedules: (await raise<Schedule[]>(queueObject(c, c.var.ns, queueParam(c)).schedules())).map(scheduleJson) }),
  )
  .put('/:queue/schedules/:name', may('schedules'), jsonBody(ScheduleBody), async (c) => {
    const b = c.req.valid('json');
    const s = await raise<Schedule>(
      queueObject(c, c.var.ns, queueParam(c)).setSchedule(c.req.param('name'), {
        cron: b.cron,
        timezone: b.timezone,
        envelope: b.envelope,
        priority: b.priority,
      }),
    );
    return c.json(scheduleJson(s));
  })
  .delete('/:queue/schedules/:name', may('schedules'), async (c) => {
    await raise(queueObject(c, c.var.ns, queueParam(c)).removeSchedule(c.req.param('name')));
    return c.json({ removed: true });
  })
  .get('/:queue/stats', may('stats'), async (c) => c.json(await queueObject(c, c.var.ns, queueParam(c)).stats()));
