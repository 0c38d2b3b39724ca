/**
 * `lakeshore push [QUEUE...]`: the process that pushes a local plane's jobs to their queues' push
 * targets (client/local/push.ts); one line per delivery until Ctrl-C or SIGTERM. The edge plane
 * pushes by itself: there is nothing to run for it.
 */
import { nextText, whyText } from '../../src/core/push-wire.ts';
import type { DispatchPlane } from '../types.ts';
import { UsageError } from './usage.ts';
import { EXIT, type Out } from './output.ts';

export async function push(d: DispatchPlane, out: Out, queues: string[]): Promise<number> {
  const { Dispatch } = await import('../local/dispatch.ts');
  if (!(d instanceof Dispatch))
    throw new UsageError(
      "the edge plane pushes by itself (set a queue's target with `lakeshore queue Q --push-url URL`): `lakeshore push` is for a local plane",
    );
  const { startPushing } = await import('../local/push.ts');
  const pushing = startPushing(d, {
    ...(queues.length ? { queues } : {}),
    onDelivered: (queue, x) =>
      out.print(
        { queue, ...x },
        `${queue}  ${x.id}  attempt ${x.attempt}  ${x.status ?? 'no answer'}  ${x.ms} ms  ${x.outcome}${x.error ? `: ${whyText(x)}` : ''}${nextText(x)}`,
      ),
  });
  process.stderr.write(
    `lakeshore push: pushing ${queues.length ? queues.join(', ') : 'every queue with a push target'} of namespace ${d.namespace}; Ctrl-C stops\n`,
  );
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await pushing.stop();
  return EXIT.ok;
}
