/**
 * A fire of a queue's schedules submits at most MAX_TICKS_PER_FIRE ticks (src/core/sql/schedules.ts):
 * each tick is a batch of its own, and Cloudflare bounds what one alarm may ask of D1. The rest
 * are still due, and the sweep's wake names now for them. The planes' timers that run it are
 * shown by the conformance suite (many schedules due at once, on every plane).
 */
import { DatabaseSync } from 'node:sqlite';
import { expect, it } from 'vitest';
import { migrate } from '../../client/local/migrate.ts';
import { SqlitePort } from '../../client/local/sqlite-port.ts';
import { Engine } from '../../src/core/engine.ts';
import { MAX_TICKS_PER_FIRE } from '../../src/core/sql/schedules.ts';

it('fires at most MAX_TICKS_PER_FIRE ticks at a time, the rest next, each once', async () => {
  const db = new DatabaseSync(':memory:');
  migrate(db);
  const clock = { now: Date.UTC(2026, 11, 7, 9, 59, 0) };
  const engine = new Engine(new SqlitePort(db), { now: () => clock.now });
  const names = Array.from({ length: 250 }, (_, i) => `s${String(i).padStart(3, '0')}`);
  // Every hour, on the hour: all 250 due at 10:00.
  for (const name of names) await engine.admin.setSchedule('ns', 'q', name, { cron: '0 0 * * * *', envelope: new Uint8Array([1]) });
  clock.now = Date.UTC(2026, 11, 7, 10, 0, 0, 500);
  const fires: number[] = [];
  for (let i = 0; i < 5; i++) fires.push(await engine.admin.fire('ns', 'q'));
  expect(MAX_TICKS_PER_FIRE).toBe(100);
  expect(fires).toEqual([100, 100, 50, 0, 0]);
  const ids = (db.prepare(`SELECT id FROM invocations ORDER BY id`).all() as { id: string }[]).map((r) => r.id.split(':')[2]);
  expect(ids).toEqual(names);
});
