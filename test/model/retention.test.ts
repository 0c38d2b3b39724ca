/**
 * Retention's age condition on the shared core (sql/purge.ts), with the clock injected: a finished
 * job is deleted once its queue's retention has passed since it finished, and not a millisecond
 * before; waiting and running jobs never. The plane tests (test/edge/retention.test.ts, the
 * conformance suite) show the timers that run it; this one pins the boundary.
 */
import { DatabaseSync } from 'node:sqlite';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../client/local/migrate.ts';
import { SqlitePort } from '../../client/local/sqlite-port.ts';
import { Engine } from '../../src/core/engine.ts';

const NS = 'rt';
const Q = 'q';
const RETENTION = 60_000;

describe('retention keeps what is inside it', () => {
  it('purges a finished job one millisecond past its retention, keeps one at or inside it with its frames, and never a waiting or running one', async () => {
    const db = new DatabaseSync(':memory:');
    migrate(db);
    const clock = { now: 10_000_000 };
    const engine = new Engine(new SqlitePort(db), { now: () => clock.now });
    await engine.admin.configure(NS, Q, { retentionMs: RETENTION });
    // Finished at known moments: the row's finished_at is its age's only input.
    const ages = { past: RETENTION + 1, edge: RETENTION, inside: RETENTION - 1, young: 1_000 };
    for (const [id, age] of Object.entries(ages)) {
      await engine.submit(NS, Q, { id, envelope: new Uint8Array([1]) });
      const c = await engine.work.claim(NS, Q, { workerId: 'w' });
      await engine.journal.append(NS, id, { workerId: 'w', attempt: c!.attempt, seq: 0, kind: 0, body: new Uint8Array([2]) });
      await engine.work.ack(NS, id, { workerId: 'w', attempt: c!.attempt });
      db.prepare('UPDATE invocations SET finished_at = ? WHERE id = ?').run(clock.now - age, id);
    }
    await engine.submit(NS, Q, { id: 'running', envelope: new Uint8Array([1]) });
    await engine.submit(NS, Q, { id: 'waiting', envelope: new Uint8Array([1]) });
    await engine.work.claim(NS, Q, { workerId: 'w', leaseMs: 3_600_000 });
    db.prepare(`UPDATE invocations SET created_at = 0, updated_at = 0 WHERE id IN ('waiting', 'running')`).run();

    const out = await engine.admin.purge(NS, Q);
    expect(out).toMatchObject({ jobs: 1, frames: 1 });
    const left = (db.prepare('SELECT id, state FROM invocations ORDER BY rid').all() as { id: string; state: string }[]).map(
      (r) => `${r.id}:${r.state}`,
    );
    expect(left).toEqual(['edge:succeeded', 'inside:succeeded', 'young:succeeded', 'running:running', 'waiting:queued']);
    const frames = db.prepare('SELECT i.id FROM frames f JOIN invocations i ON i.rid = f.inv ORDER BY i.rid').all() as { id: string }[];
    expect(frames.map((f) => f.id)).toEqual(['edge', 'inside', 'young']);
    // Its next pass is due when the oldest kept one passes its retention.
    expect(out.nextAt).toBe(clock.now - ages.edge + RETENTION);
    clock.now += 1;
    expect(await engine.admin.purge(NS, Q)).toMatchObject({ jobs: 1 });
    expect(await engine.get(NS, 'edge')).toBeNull();
    expect((await engine.get(NS, 'inside'))?.state).toBe('succeeded');
  });
});
