/**
 * The id a submit without one gets (client/ids.ts jobId, Python queue.job_id): 20 letters and
 * digits, the time first, so ids sort as their times do and a shard's id index grows at its end.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jobId } from '../../client/ids.ts';

const ROOT = join(import.meta.dirname, '..', '..');

describe('default job ids', () => {
  it('are 20 letters and digits, and sort as their times do, a millisecond apart or years', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 62 ** 8 - 2 }), fc.integer({ min: 1, max: 10 ** 12 }), (t, gap) => {
        const later = Math.min(62 ** 8 - 1, t + gap);
        const [a, b] = [jobId(t), jobId(later)];
        expect(a).toMatch(/^[0-9A-Za-z]{20}$/);
        expect(a < b).toBe(true);
      }),
    );
  });

  it('differ within one millisecond, each random digit drawn from all 62', () => {
    const ids = Array.from({ length: 20_000 }, () => jobId(1_796_437_000_000));
    expect(new Set(ids).size).toBe(ids.length);
    expect(new Set(ids.map((id) => id.slice(0, 8)))).toEqual(new Set(['0VctGZma']));
    expect(new Set(ids.flatMap((id) => [...id.slice(8)])).size).toBe(62);
  });

  it('are made the same way by the Python client', () => {
    const py = spawnSync(
      'python3',
      ['-c', 'from lakeshore.queue import job_id; print(job_id(1796437000000)); print(job_id(0)); print(job_id(62 ** 8 - 1))'],
      { env: { ...process.env, PYTHONPATH: join(ROOT, 'client', 'python') }, encoding: 'utf8' },
    );
    expect(py.status, py.stderr).toBe(0);
    const [now, zero, last] = py.stdout.trim().split('\n');
    expect([now!.slice(0, 8), zero!.slice(0, 8), last!.slice(0, 8)]).toEqual(['0VctGZma', '00000000', 'zzzzzzzz']);
    for (const id of [now, zero, last]) expect(id).toMatch(/^[0-9A-Za-z]{20}$/);
    expect([jobId(0).slice(0, 8), jobId(62 ** 8 - 1).slice(0, 8)]).toEqual(['00000000', 'zzzzzzzz']);
  });
});
