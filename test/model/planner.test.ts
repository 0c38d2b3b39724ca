/**
 * What SQLite's query planner is given (src/core/port.ts, `stmt`). A planner that reads a bound
 * value (a LIMIT's; on Node's SQLite, the equality terms of a subquery with an ORDER BY) compiles
 * the statement again each time the value is bound: the claim, the promote and TTL sweeps, the
 * wake read and a set's ack were compiled on every run. So no statement the core builds shows the
 * planner a parameter, and what used to lean on a value to pick its index (the count of one
 * state, through that state's partial index) names the index's condition itself.
 *
 * Recorded from a worker's and a producer's verbs on the local plane: every statement that ran.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlitePort } from '../../client/local/sqlite-port.ts';
import { Dispatch } from '../../client/local/index.ts';
import type { Stmt } from '../../src/core/port.ts';
import { ackPlan } from '../../src/core/sql/ack.ts';
import { countPlan } from '../../src/core/sql/read.ts';
import { releasePlan } from '../../src/core/sql/release.ts';
import { STATES } from '../../src/core/states.ts';

const bytes = (s: string) => new TextEncoder().encode(s);
/** A parameter the planner can see: `?N` not written `+?N`. */
const BARE = /(?<![\w+?])\?\d+/;

describe("the query planner sees no parameter's value", () => {
  const ran = new Map<string, Stmt>();
  let d: Dispatch;
  const original = SqlitePort.prototype.batchSync;

  beforeAll(async () => {
    SqlitePort.prototype.batchSync = function (this: SqlitePort, stmts: Stmt[]) {
      for (const s of stmts) ran.set(s.sql, s);
      return original.call(this, stmts);
    };
    d = new Dispatch(':memory:', { namespace: 'planner' });
    await d.configureQueue('q', { ttlMs: 60_000 });
    for (let i = 0; i < 6; i++) await d.submit('q', bytes('x'), { id: `s${i}`, priority: i % 2 });
    await d.submit('q', bytes('x'), { id: 'later', delayMs: 60_000 });
    await d.submitMany(
      'q',
      [0, 1, 2].map((i) => ({ envelope: bytes('x'), opts: { id: `m${i}`, key: `k${i}` } })),
    );
    const one = (await d.claim('q', 'w'))!;
    await d.heartbeat(one.id, 'w');
    await d.journalAppend(one.id, 0, { kind: 0, seq: 0, body: bytes('frame'), meta: null }, { workerId: 'w' });
    await d.ack(one.id, 'w', { result: bytes('ok') });
    const many = await d.claimMany('q', 'w', 4);
    await Promise.all(many.slice(0, 3).map((c) => d.ack(c.id, 'w')));
    await d.nack(many[3]!.id, 'w', { error: 'no', retry: false });
    await d.cancel('m2');
    for (const st of STATES) await d.count('q', st);
  });
  afterAll(async () => {
    SqlitePort.prototype.batchSync = original;
    await d?.close();
  });

  it('every statement a producer and a worker run writes its parameters +?N', () => {
    const verbs = [...ran.keys()].filter((sql) => /\binvocations\b/.test(sql));
    expect(verbs.length).toBeGreaterThan(10); // claims, sweeps, acks, submits, counts were seen
    expect(verbs.filter((sql) => /\bstate = 'running', attempt = attempt \+ 1/.test(sql)).length).toBeGreaterThan(0);
    expect([...ran.keys()].filter((sql) => BARE.test(sql))).toEqual([]);
  });

  it("counts each state through that state's own index", () => {
    const db = (d as unknown as { db: import('node:sqlite').DatabaseSync }).db;
    const index = { delayed: 'invocations_delayed', queued: 'invocations_queued', running: 'invocations_running' } as Record<
      string,
      string
    >;
    for (const st of STATES) {
      const s = countPlan('planner', 'q', st).stmts[0]!;
      const plan = (db.prepare(`EXPLAIN QUERY PLAN ${s.sql}`).all(...s.args) as { detail: string }[]).map((r) => r.detail);
      // Every branch reads an index (the one the CASE takes is the state's), never the whole namespace.
      expect(
        plan
          .filter((p) => /invocations/.test(p))
          .every((p) => /USING COVERING INDEX invocations_(delayed|queued|running|finished)/.test(p)),
      ).toBe(true);
      expect(plan.some((p) => p.includes(index[st] ?? 'invocations_finished (ns=? AND queue=? AND state=?)'))).toBe(true);
    }
  });

  it('counts what a plain count counts', async () => {
    const db = (d as unknown as { db: import('node:sqlite').DatabaseSync }).db;
    for (const st of STATES) {
      const plain = db.prepare(`SELECT count(*) AS n FROM invocations WHERE ns = 'planner' AND queue = 'q' AND state = ?`).get(st) as {
        n: number;
      };
      expect(await d.count('q', st)).toBe(Number(plain.n));
    }
    expect(await d.count('q', 'queued')).toBeGreaterThan(0);
    expect(await d.count('q', 'succeeded')).toBe(4);
  });

  it("finds a worker's jobs by their ids, never by reading its namespace's running rows", () => {
    const db = (d as unknown as { db: import('node:sqlite').DatabaseSync }).db;
    const holder = { workerId: 'w', attempt: 1 };
    const sets = [
      // A set's ack (several items in one statement) and a release: neither ran above.
      ...ackPlan(
        1,
        'planner',
        ['a', 'b', 'c'].map((id) => ({ id, queue: 'q', holder, result: null })),
      ).stmts,
      ...releasePlan(1, 'planner', 'q', 'w', [
        { id: 'a', attempt: 1 },
        { id: 'b', attempt: 1 },
      ]).stmts,
    ];
    expect(sets[0]!.sql).toMatch(/FROM m\b/);
    const scans = [...ran.values(), ...sets].flatMap((s) =>
      (db.prepare(`EXPLAIN QUERY PLAN ${s.sql}`).all(...s.args) as { detail: string }[])
        // The running rows' index searched by the namespace alone: every running job of it read.
        .filter((r) => /invocations_running \(ns=\?\)/.test(r.detail))
        .map((r) => `${r.detail}: ${s.sql.replace(/\s+/g, ' ').slice(0, 120)}`),
    );
    expect(scans).toEqual([]);
  });
});
