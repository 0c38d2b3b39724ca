/**
 * Moving the namespace to another shard (src/durable/mover.ts): the deployment's operator, with the
 * root token. `POST /move` starts it and answers 202 with where it is; the mover carries it on in
 * steps of its own, and `GET /move?wait_ms=` answers where it is, once it has ended or the wait
 * has passed.
 */
import { Hono } from 'hono';
import { badRequest } from '../../core/errors.ts';
import { raise } from '../../core/settled.ts';
import { SHARD_BINDING } from '../../core/shards.ts';
import { waitMs } from '../../core/validate.ts';
import { MoveBody } from '../../core/wire.ts';
import { forgetPlacement, shardsOf } from '../../durable/directory.ts';
import type { MoveStatus } from '../../durable/move-state.ts';
import type { MoverObject } from '../../durable/mover.ts';
import { may } from '../auth.ts';
import { jsonBody, numParam } from '../body.ts';
import type { App } from '../plane.ts';

/** The longest `GET /move` waits for the move to end. */
export const MAX_MOVE_WAIT_MS = 60_000;

const moverOf = (env: Env, ns: string) => (env.MOVER as unknown as DurableObjectNamespace<MoverObject>).getByName(ns);

const statusJson = (m: MoveStatus) => ({
  namespace: m.ns,
  from: m.from,
  to: m.to,
  state: m.state,
  phase: m.phase,
  jobs: m.jobs,
  frames: m.frames,
  queues: m.queues,
  schedules: m.schedules,
  objects: m.objects,
  caught_up: m.caughtUp,
  fenced_ms: m.fencedMs,
  ms: m.ms,
  steps: m.steps,
  most_subrequests_a_step: m.mostInStep,
  rows_read: m.rowsRead,
  error: m.error,
});

export const move = new Hono<App>()
  .post('/', may('move'), jsonBody(MoveBody), async (c) => {
    const { to } = c.req.valid('json');
    const shards = shardsOf(c.env).map((s) => s.name);
    if (!SHARD_BINDING.test(to) || !shards.includes(to))
      throw badRequest(`no shard ${JSON.stringify(to)}: the plane has ${shards.join(', ')}`);
    return c.json(statusJson(await raise(moverOf(c.env, c.var.ns).start(to))), 202);
  })
  .get('/', may('move'), async (c) => {
    const wait = waitMs('wait_ms', numParam(c, 'wait_ms'), 0, MAX_MOVE_WAIT_MS);
    const m = await raise(moverOf(c.env, c.var.ns).status(wait));
    // This isolate reads the namespace where it is now (others within their placement's 5 s).
    if (m.state !== 'moving') forgetPlacement(c.var.ns);
    return c.json(statusJson(m));
  });
