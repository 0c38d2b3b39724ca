/** bench/table.mjs: the side-by-side table says, per case, how lakeshore stands against the best peer of the same sitting. */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { expect, it } from 'vitest';
import { tempDir } from '../support/tmp.ts';

const row = (system: string, label: string, extra: Record<string, unknown>) => JSON.stringify({ system, label, exactly_once: true, ...extra });

it('prints lakeshore\'s ratio to the best peer of each case: jobs/s for throughput, p50 latency for idle', () => {
  const file = join(tempDir('lakeshore-table-'), 'runs.jsonl');
  const bulk = { mode: 'throughput', enqueue: 'bulk', batch: 100, latency_ms: { p50: 800, p99: 900 } };
  writeFileSync(file, [
    row('lakeshore-edge', 'edge-bulk', { ...bulk, throughput_jobs_per_s: 10_000, cpu_us_per_job: { producers: 20, worker: 40, plane: 100 } }),
    row('lakeshore-edge', 'edge-bulk', { ...bulk, throughput_jobs_per_s: 14_000, cpu_us_per_job: { producers: 30, worker: 50, plane: 90 } }),
    row('lakeshore-local', 'local-bulk', { ...bulk, throughput_jobs_per_s: 30_000, cpu_us_per_job: { producers: 25, worker: 35, plane: null } }),
    row('bullmq', 'bulk', { ...bulk, throughput_jobs_per_s: 10_000 }),
    row('pg-boss', 'bulk', { ...bulk, throughput_jobs_per_s: 11_000 }),
    row('lakeshore-edge', 'edge-idle', { mode: 'idle', latency_ms: { p50: 3, p99: 9 } }),
    row('bullmq', 'idle', { mode: 'idle', latency_ms: { p50: 1.5, p99: 2 } }),
    row('lakeshore-edge', 'edge-bulk-listened', { ...bulk, throughput_jobs_per_s: 9_000, feed_listener: 1 }),
    ...[3_000, 4_000, 5_000].map((n) => row('lakeshore-edge', 'edge-fan-in', {
      mode: 'fan-in', connections: 256, d1_delay_ms: 0, submits_per_s: n, latency_ms: { p50: 20, p99: 900 }, latency_d1_round_trips: { p50: 16, p99: 700 },
      submits_per_d1_batch: 17, ceilings: { health_per_s: 18_000, submit_request_without_queue_object_per_s: 7_800, queue_object_call_per_s: 6_000 },
    })),
  ].join('\n'));
  const r = spawnSync(process.execPath, [resolve(import.meta.dirname, '..', '..', 'bench', 'table.mjs'), file], { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  const line = (system: string, c: string) => r.stdout.split('\n').find((l) => l.startsWith(`| ${system} | ${c}`))!;
  expect(line('lakeshore-edge', 'bulk')).toContain('| 1.09× pg-boss | 95 / 25 / 45 |'); // median 12,000 over pg-boss's 11,000; CPU medians by process
  expect(line('lakeshore-local', 'bulk')).toContain('| — / 25 / 35 |'); // the local plane runs inside the producers' and the worker's processes
  expect(line('bullmq', 'bulk')).toContain('| — |'); // the peers' harness does not measure it
  expect(line('pg-boss', 'bulk')).toContain('| best peer |');
  expect(line('lakeshore-edge', 'idle')).toContain('| 2.00× bullmq (latency) |');
  expect(line('lakeshore-edge', 'bulk (100), a feed listener')).toContain('| 0.82× pg-boss |'); // its own row, not mixed into edge-bulk's
  expect(line('256 connections', '3')).toContain('| **4,000** [3,000–5,000] | 20.0 / 900 | 16.0 / 700.0 | 17.0 | 18,000, 7,800, 6,000 | 3/3 |');
});
