/**
 * Moving a namespace to another shard (src/durable/mover.ts) on `wrangler dev` with three shards,
 * with producers submitting and a worker running jobs throughout; the move is the operator's
 * command, `lakeshore admin move-namespace`. Every job runs and succeeds once, the counts are what
 * they were, and every journal is whole.
 */
import { expect, it } from 'vitest';
import { currentJob, encodeEnvelope, FrameKind, HttpDispatch, runWorker } from '../../client/local/index.ts';
import { cli, planeEnv } from './setup/cli.ts';
import { until } from '../support/wait.ts';
import { STATES } from '../../src/core/states.ts';

const N = 240;
/** How many jobs the producers may be ahead of the worker. */
const BACKLOG = 40;

it('moves a namespace with producers and a worker running throughout: every job once, counts equal, journals intact', async () => {
  const env = planeEnv('edge');
  const ns = env.LAKESHORE_NAMESPACE!;
  const d = new HttpDispatch(env.LAKESHORE_URL!, { token: env.LAKESHORE_TOKEN!, namespace: ns, retryForMs: 30_000 });
  await d.configureQueue('mv', { maxAttempts: 1 }); // a second attempt of any job would fail this test
  // Frames kept a day after their job: each finished job is noted for its frames' removal, and the
  // notes move with the jobs (the move's check counts them on both shards).
  await d.configureQueue('mv', { journalRetentionMs: 86_400_000 });
  // Rows besides the jobs under load: a binary envelope and a text one (kept as stored), a
  // queue's settings, a cron schedule.
  const binary = new Uint8Array([0, 255, 1, 254, 0]);
  await d.submit('keep', binary, { id: 'bin' });
  await d.submit('keep', new TextEncoder().encode('{"plain":"text"}'), { id: 'txt', key: 'k1', priority: 3 });
  await d.configureQueue('keep', { leaseMs: 12_345, retentionMs: 86_400_000 });
  await d.setSchedule('keep', 'nightly', { cron: '0 3 * * *', envelope: binary });
  const from = (await d.storage()).shard;
  const to = from === 'DB_2' ? 'DB_1' : 'DB_2';

  const runs = new Map<string, number>();
  const stop = new AbortController();
  const worker = runWorker('mv', {
    dispatch: new HttpDispatch(env.LAKESHORE_URL!, { token: env.LAKESHORE_TOKEN!, namespace: ns, retryForMs: 30_000 }),
    concurrency: 4,
    claimWaitMs: 1_000,
    stop: stop.signal,
    registry: {
      async *step(i: number) {
        const id = currentJob()!.id;
        runs.set(id, (runs.get(id) ?? 0) + 1);
        for (let k = 0; k < 3; k++) yield `${i}.${k}`;
        return `done ${i}`;
      },
    },
  });
  // At least N jobs, and producers submitting until the move has ended (its fence included), at
  // most BACKLOG ahead of the worker: what is left when the move ends runs in seconds, however
  // long the move took (unpaced, the producers outran the worker and the rest took most of a minute).
  let next = 0;
  let moving = true;
  const produce = Promise.all(
    Array.from({ length: 2 }, async () => {
      while (moving || next < N) {
        await until(() => next - runs.size < BACKLOG, `the worker within ${BACKLOG} jobs of the producers`, 60_000);
        const i = next++;
        await d.submit('mv', encodeEnvelope({ fn: 'step', args: [i] }), { id: `m${i}` });
      }
    }),
  );
  await until(async () => next >= N / 3 && (await d.count('mv', 'succeeded')) > 20, 'work under way', 30_000);
  const moved = await cli(['--json', 'admin', 'move-namespace', ns, '--to', to], env);
  expect(moved.code, moved.stderr).toBe(0);
  const report = JSON.parse(moved.stdout);
  expect(report).toMatchObject({ namespace: ns, from, to });
  expect(report.jobs).toBeGreaterThan(N / 3 - 1);
  console.log(`[move] ${JSON.stringify(report)}`);
  moving = false;
  await produce;
  const total = next;
  const where = async () => {
    const by = await Promise.all(STATES.map(async (s) => `${s} ${await d.count('mv', s)}`));
    return `${total} jobs succeeded (${by.join(', ')}; ${runs.size} run by the worker)`;
  };
  const drained = Date.now();
  const left = total - (await d.count('mv', 'succeeded'));
  await until(async () => (await d.count('mv', 'succeeded')) === total, where, 60_000, 200);
  console.log(`[move] ${total} jobs; ${left} left as the move ended, the last ran ${Date.now() - drained} ms after`);
  stop.abort();
  await worker;

  expect((await d.storage()).shard).toBe(to);
  expect(await d.get('bin')).toMatchObject({ state: 'queued', envelope: binary });
  expect(await d.get('txt')).toMatchObject({ key: 'k1', priority: 3, envelope: new TextEncoder().encode('{"plain":"text"}') });
  expect(await d.submit('keep', new Uint8Array([9]), { id: 'other', key: 'k1' })).toBe('txt'); // the key's index came along
  expect((await d.queueInfo('keep')).settings).toMatchObject({ leaseMs: 12_345, retentionMs: 86_400_000 });
  expect((await d.queueInfo('mv')).settings).toMatchObject({ maxAttempts: 1, journalRetentionMs: 86_400_000 });
  expect((await d.listSchedules('keep')).map((s) => [s.name, s.cron])).toEqual([['nightly', '0 3 * * *']]);
  for (const s of STATES.filter((s) => s !== 'succeeded')) expect(await d.count('mv', s), s).toBe(0);
  expect(await d.count('mv', 'succeeded')).toBe(total);
  const twice = [...runs].filter(([, n]) => n !== 1);
  expect(twice, 'jobs run more than once').toEqual([]);
  expect(runs.size).toBe(total);
  const broken: string[] = [];
  let read = 0;
  const reader = async () => {
    for (let i = read++; i < total; i = read++) {
      const page = await d.journalPage(`m${i}`);
      const values = page.frames.filter((f) => f.kind === FrameKind.VALUE).map((f) => JSON.parse(new TextDecoder().decode(f.body)));
      if (JSON.stringify(values) !== JSON.stringify([`${i}.0`, `${i}.1`, `${i}.2`]) || page.state !== 'succeeded') broken.push(`m${i}`);
    }
  };
  await Promise.all(Array.from({ length: 8 }, reader));
  expect(broken, 'journals not whole').toEqual([]);
  // Where its move is, asked again: how it ended.
  const status = await cli(['--json', 'admin', 'move-status', ns], env);
  expect(status.code, status.stderr).toBe(0);
  expect(JSON.parse(status.stdout)).toMatchObject({ namespace: ns, from, to, state: 'moved', phase: 'ended', jobs: report.jobs });
  expect((await cli(['admin', 'move-status', `never-${ns}`], env)).code).toBe(3);
  // A second move of the same namespace to where it is now is refused, and changes nothing.
  const again = await cli(['admin', 'move-namespace', ns, '--to', to], env);
  expect(again.code).not.toBe(0);
  expect(again.stderr).toMatch(new RegExp(`is on ${to} already`));
  // The operator's view of the shards: the namespace counted on the one it moved to, and listed there.
  const shards = await cli(['--json', 'admin', 'shards'], env);
  expect(shards.code, shards.stderr).toBe(0);
  const each = shards.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  expect(each.map((s) => s.shard)).toEqual(['DB', 'DB_1', 'DB_2']);
  for (const s of each) expect(s).toMatchObject({ bytes: expect.any(Number), limitBytes: expect.any(Number), full: false });
  expect(each.find((s) => s.shard === to).namespaces).toBeGreaterThanOrEqual(1);
  const text = await cli(['admin', 'shards'], env);
  expect(text.stdout).toMatch(new RegExp(`^${to} +[\\d.]+ MB of 10\\.00 GB \\([\\d.]+ %\\)  \\d+ namespaces?$`, 'm'));
  expect((await cli(['admin', 'shards', to], env)).stdout.split('\n')).toContain(ns);
  expect((await cli(['admin', 'shards', from], env)).stdout.split('\n')).not.toContain(ns);
  const unknown = await cli(['admin', 'shards', 'DB_9'], env);
  expect([unknown.code, unknown.stderr]).toEqual([3, expect.stringMatching(/no shard "DB_9": the plane has DB, DB_1, DB_2/)]);
}, 180_000);
