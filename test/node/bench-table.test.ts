/** bench/table.mjs: the side-by-side table says, per case, how lakeshore stands against the best peer of the same sitting. */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { expect, it } from 'vitest';
import { tempDir } from '../support/tmp.ts';

const row = (system: string, label: string, extra: Record<string, unknown>) =>
  JSON.stringify({ system, label, exactly_once: true, ...extra });

it("prints lakeshore's ratio to the best peer of each case: jobs/s for throughput, p50 latency for idle", () => {
  const file = join(tempDir('lakeshore-table-'), 'runs.jsonl');
  const bulk = { mode: 'throughput', enqueue: 'bulk', batch: 100, latency_ms: { p50: 800, p99: 900 } };
  writeFileSync(
    file,
    [
      row('lakeshore-edge', 'edge-bulk', {
        ...bulk,
        throughput_jobs_per_s: 10_000,
        cpu_us_per_job: { producers: 20, worker: 40, plane: 100 },
      }),
      row('lakeshore-edge', 'edge-bulk', {
        ...bulk,
        throughput_jobs_per_s: 14_000,
        cpu_us_per_job: { producers: 30, worker: 50, plane: 90 },
      }),
      row('lakeshore-local', 'local-bulk', {
        ...bulk,
        throughput_jobs_per_s: 30_000,
        cpu_us_per_job: { producers: 25, worker: 35, plane: null },
      }),
      row('bullmq', 'bulk', { ...bulk, throughput_jobs_per_s: 10_000 }),
      row('pg-boss', 'bulk', { ...bulk, throughput_jobs_per_s: 11_000 }),
      row('lakeshore-edge', 'edge-idle', { mode: 'idle', latency_ms: { p50: 3, p99: 9 } }),
      row('bullmq', 'idle', { mode: 'idle', latency_ms: { p50: 1.5, p99: 2 } }),
      row('lakeshore-edge', 'edge-bulk-listened', { ...bulk, throughput_jobs_per_s: 9_000, feed_listener: 1, feed_readers: 1 }),
      row('lakeshore-edge', 'edge-bulk-listened-10', { ...bulk, throughput_jobs_per_s: 8_800, feed_listener: 1, feed_readers: 10 }),
      ...[3_000, 4_000, 5_000].map((n) =>
        row('lakeshore-edge', 'edge-fan-in', {
          mode: 'fan-in',
          connections: 256,
          d1_delay_ms: 0,
          submits_per_s: n,
          latency_ms: { p50: 20, p99: 900 },
          latency_d1_round_trips: { p50: 16, p99: 700 },
          submits_per_d1_batch: 17,
          ceilings: { health_per_s: 18_000, submit_request_without_queue_object_per_s: 7_800, queue_object_call_per_s: 6_000 },
        }),
      ),
    ].join('\n'),
  );
  const r = spawnSync(process.execPath, [resolve(import.meta.dirname, '..', '..', 'bench', 'table.mjs'), file], { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  const line = (system: string, c: string) => r.stdout.split('\n').find((l) => l.startsWith(`| ${system} | ${c}`))!;
  expect(line('lakeshore-edge', 'bulk')).toContain('| 1.09× pg-boss | 95 / 25 / 45 |'); // median 12,000 over pg-boss's 11,000; CPU medians by process
  expect(line('lakeshore-local', 'bulk')).toContain('| — / 25 / 35 |'); // the local plane runs inside the producers' and the worker's processes
  expect(line('bullmq', 'bulk')).toContain('| — |'); // the peers' harness does not measure it
  expect(line('pg-boss', 'bulk')).toContain('| best peer |');
  expect(line('lakeshore-edge', 'idle')).toContain('| 2.00× bullmq (latency) |');
  expect(line('lakeshore-edge', 'bulk (100), a feed reader |')).toContain('| 0.82× pg-boss |'); // its own row, not mixed into edge-bulk's
  expect(line('lakeshore-edge', 'bulk (100), 10 feed readers |')).toContain('| 0.80× pg-boss |'); // and the ten readers' row says so
  expect(line('256 connections', '3')).toContain(
    '| **4,000** [3,000–5,000] | 20.0 / 900 | 16.0 / 700.0 | 17.0 | 18,000, 7,800, 6,000 | 3/3 |',
  );
});

it('sets each performance target beside its goal, with the ratios of interleaved rounds run k beside run k', () => {
  const file = join(tempDir('lakeshore-table-'), 'runs.jsonl');
  const thr = (enqueue: string) => ({ mode: 'throughput', enqueue, latency_ms: { p50: 5, p99: 9 } });
  writeFileSync(
    file,
    [
      // edge bulk 12,000 (median) against the best peer's 10,000: 1.20x, met; round by round 1.10, 1.20, 1.30
      ...[
        [1, 11_000, 10_000],
        [2, 12_000, 10_000],
        [3, 13_000, 10_000],
      ].flatMap(([rep, ours, theirs]) => [
        row('lakeshore-edge', 'edge-bulk', { ...thr('bulk'), batch: 100, rep, throughput_jobs_per_s: ours, d1: { rows_read_per_job: 17 } }),
        row('bullmq', 'bulk', { ...thr('bulk'), batch: 100, rep, throughput_jobs_per_s: theirs }),
        row('pgboss', 'bulk', { ...thr('bulk'), batch: 100, rep, throughput_jobs_per_s: theirs! - 1_000 }),
      ]),
      // edge single 1,500 against pg-boss send 2,000 (0.75x, not met) and the no-worker ceiling 2,000 (75 %, met)
      ...[
        [1, 1_500, 2_000],
        [2, 1_400, 2_100],
        [3, 1_600, 1_900],
      ].flatMap(([rep, ours, pg]) => [
        row('lakeshore-edge', 'edge-single', {
          ...thr('single'),
          rep,
          throughput_jobs_per_s: ours,
          cpu_us_per_job: { producers: 100, worker: 100, plane: 600 },
        }),
        row('pgboss', 'single', { ...thr('single'), rep, throughput_jobs_per_s: pg }),
      ]),
      // out of order in the file: a round's ratio pairs runs by their round, not by their place
      ...[
        [3, 2_200],
        [1, 2_000],
        [2, 1_800],
      ].map(([rep, ceil]) =>
        JSON.stringify({
          system: 'lakeshore-edge',
          mode: 'ceiling',
          label: 'edge-ceiling',
          rep,
          enqueue_only: { jobs_per_s: ceil, cpu_us_per_job: { producers: 90, plane: 450 } },
        }),
      ),
      row('lakeshore-edge', 'edge-bulk-d1-20ms', { ...thr('bulk'), batch: 100, d1_delay_ms: 20, throughput_jobs_per_s: 9_000 }),
      JSON.stringify({ system: 'lakeshore-edge', mode: 'd1-ceiling', label: 'edge-d1-ceiling', jobs_per_s: 9_500 }),
      row('lakeshore-edge', 'edge-idle', { mode: 'idle', latency_ms: { p50: 6, p99: 9 }, submit_rtt_ms: { p50: 5.5 } }),
      row('bullmq', 'idle', { mode: 'idle', latency_ms: { p50: 2, p99: 4 } }),
      ...[
        [0, 3_000],
        [20, 2_500],
      ].map(([delay, n]) =>
        row('lakeshore-edge', 'edge-fan-in', {
          mode: 'fan-in',
          connections: 256,
          d1_delay_ms: delay,
          submits_per_s: n,
          latency_ms: { p50: 20, p99: 900 },
          latency_d1_round_trips: { p50: 16, p99: 700 },
          submits_per_d1_batch: 17,
          ceilings: { health_per_s: 18_000, submit_request_without_queue_object_per_s: n! + 1_000, queue_object_call_per_s: 6_000 },
        }),
      ),
    ].join('\n'),
  );
  const r = spawnSync(process.execPath, [resolve(import.meta.dirname, '..', '..', 'bench', 'table.mjs'), file], { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  const target = (what: string) => r.stdout.split('\n').find((l) => l.startsWith(`| ${what} |`))!;
  expect(target('edge bulk against the best peer')).toBe(
    '| edge bulk against the best peer | 1.20× | ≥ 1.20× | yes | 12,000 / 10,000 bullmq | 1.10, 1.20, 1.30 |',
  );
  expect(target('edge single against pg-boss `send`')).toBe(
    '| edge single against pg-boss `send` | 0.75× | ≥ 1.00× | no | 1,500 / 2,000 | 0.75, 0.67, 0.84 |',
  );
  expect(target('edge single against 8 single-submit loops with no worker')).toBe(
    "| edge single against 8 single-submit loops with no worker | 75 % | ≥ 75 % | yes | 1,500 / 2,000; the plane's CPU a job 600 µs against 450 with no worker | 0.75, 0.78, 0.73 |",
  );
  expect(target('edge bulk with D1 +20 ms, jobs/s')).toBe(
    '| edge bulk with D1 +20 ms, jobs/s | 9,000 | ≥ 10,000 | no | D1 alone, with no delay, 9,500 |  |',
  );
  expect(target("edge idle p50 against bullmq's")).toBe(
    "| edge idle p50 against bullmq's | 3.00× | ≤ 2.00× | no | 6.00 / 2.00 ms; the submit's own round trip 5.50 ms |  |",
  );
  expect(target('fan-in, 256 connections, submits/s')).toBe(
    '| fan-in, 256 connections, submits/s | 3,000 | ≥ 15,000 | no | a submit request refused before the queue object: 4,000/s |  |',
  );
  expect(target('fan-in, 256 connections, D1 +20 ms, submits/s')).toBe(
    '| fan-in, 256 connections, D1 +20 ms, submits/s | 2,500 | ≥ 10,000 | no | a submit request refused before the queue object: 3,500/s |  |',
  );
  expect(target('D1 rows read per job (bulk)')).toBe('| D1 rows read per job (bulk) | 17.00 | ≤ 10.00 | no |  |  |');
});
