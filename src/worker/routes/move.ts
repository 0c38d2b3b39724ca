/** Moving the namespace to another shard (src/durable/mover.ts): the deployment's operator, with the root token. */
import { Hono } from 'hono';
import { badRequest } from '../../core/errors.ts';
import { raise } from '../../core/settled.ts';
import { SHARD_BINDING } from '../../core/shards.ts';
import { MoveBody } from '../../core/wire.ts';
import { forgetPlacement, shardsOf } from '../../durable/directory.ts';
import type { MoverObject } from '../../durable/mover.ts';
import { may } from '../auth.ts';
import { jsonBody } from '../body.ts';
import type { App } from '../plane.ts';

export const move = new Hono<App>().post('/', may('move'), jsonBody(MoveBody), async (c) => {
  const { to } = c.req.valid('json');
  const shards = shardsOf(c.env).map((s) => s.name);
  if (!SHARD_BINDING.test(to) || !shards.includes(to))
    throw badRequest(`no shard ${JSON.stringify(to)}: the plane has ${shards.join(', ')}`);
  const mover = (c.env.MOVER as unknown as DurableObjectNamespace<MoverObject>).getByName(c.var.ns);
  const report = await raise(mover.move(to));
  forgetPlacement(c.var.ns);
  return c.json({
    namespace: report.ns,
    from: report.from,
    to: report.to,
    jobs: report.jobs,
    frames: report.frames,
    queues: report.queues,
    schedules: report.schedules,
    objects: report.objects,
    fenced_ms: report.fencedMs,
  });
});
