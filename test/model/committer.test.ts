// The committer's pipelining (committer.ts) over real SQLite: batches in flight together, answers
// in the order sent, plans that go alone, and hints that stay safe when the store applies two
// batches in flight in the other order (as a far D1 may). The port holds each batch until the
// test lets it run and then answer, so every order is the test's to choose.
import { DatabaseSync } from 'node:sqlite';
import { describe, expect, it, vi } from 'vitest';
import { SqlitePort } from '../../client/local/sqlite-port.ts';
import { migrate } from '../../client/local/migrate.ts';
import { Committer } from '../../src/core/committer.ts';
import { Engine } from '../../src/core/engine.ts';
import type { Plan } from '../../src/core/plan.ts';
import { stmt, type Port, type Stmt, type StmtResult } from '../../src/core/port.ts';
import { until } from '../support/wait.ts';

interface Held {
  stmts: Stmt[];
  /** Runs the batch on the database now (its answer still held back). */
  run(): void;
  /** Hands the answer back (running the batch first if it has not run). */
  answer(): void;
}

/** A port over SQLite whose batches wait for the test: `sent` in the order they came. */
class HeldPort implements Port {
  readonly sent: Held[] = [];
  private readonly db: SqlitePort;
  constructor(db: SqlitePort) {
    this.db = db;
  }
  batch(stmts: Stmt[]): Promise<StmtResult[]> {
    return new Promise((resolve, reject) => {
      let out: { ok: StmtResult[] } | { err: unknown } | null = null;
      const run = () => {
        if (out) return;
        try {
          out = { ok: this.db.batchSync(stmts) };
        } catch (e) {
          out = { err: e };
        }
      };
      this.sent.push({
        stmts,
        run,
        answer: () => {
          run();
          if (out && 'ok' in out) resolve(out.ok);
          else if (out) reject(out.err);
        },
      });
    });
  }
}

const BYTES = new TextEncoder().encode('job');

const setup = () => {
  const db = new DatabaseSync(':memory:');
  migrate(db);
  db.exec('CREATE TABLE t (n INTEGER)');
  const port = new HeldPort(new SqlitePort(db));
  return { db, port };
};

/** A plan that inserts `n` and answers it. */
const put = (n: number): Plan<number> => ({ stmts: [stmt('INSERT INTO t (n) VALUES (?)', n)], done: () => n });
const settled = (p: Promise<unknown>) => {
  const s = { done: false };
  void p.finally(() => (s.done = true)).catch(() => {});
  return s;
};
/** Answers every batch `p` sends until it settles. */
async function answering<T>(port: HeldPort, p: Promise<T>, from = port.sent.length): Promise<T> {
  const s = settled(p);
  let next = from;
  for (;;) {
    await until(() => port.sent.length > next || s.done, 'a batch or the answer', 5_000);
    if (s.done) return p;
    port.sent[next++]!.answer();
  }
}

/** Lets every pending microtask and immediate run (nothing here waits on a timer). */
const turn = () => new Promise((r) => setImmediate(r));

describe('committer: batches in flight', () => {
  it('sends one batch at a time by default; the next plans wait and go together', async () => {
    const { port } = setup();
    const c = new Committer(port);
    const a = c.run(put(1));
    await turn();
    const b = c.run(put(2));
    const d = c.run(put(3));
    await turn();
    expect(port.sent).toHaveLength(1);
    port.sent[0]!.answer();
    await expect(a).resolves.toBe(1);
    await until(() => port.sent.length === 2, 'the second batch', 5_000);
    expect(port.sent[1]!.stmts).toHaveLength(2);
    port.sent[1]!.answer();
    await expect(Promise.all([b, d])).resolves.toEqual([2, 3]);
  });

  it('with depth 2, sends a second batch while the first is in flight, and no third', async () => {
    const { port } = setup();
    const c = new Committer(port, { depth: 2 });
    const ps = [c.run(put(1))];
    await turn();
    ps.push(c.run(put(2)));
    await turn();
    ps.push(c.run(put(3)));
    await turn();
    expect(port.sent).toHaveLength(2);
    port.sent[0]!.answer();
    await until(() => port.sent.length === 3, 'the third batch, once the first answered', 5_000);
    port.sent[1]!.answer();
    port.sent[2]!.answer();
    await expect(Promise.all(ps)).resolves.toEqual([1, 2, 3]);
  });

  it('a patient plan waits for a plan that is not, and goes in its batch; alone once its time is up', async () => {
    const { port } = setup();
    const c = new Committer(port, { depth: 2 });
    const a = c.run(put(1), { patientMs: 60_000 });
    await turn();
    await turn();
    expect(port.sent).toHaveLength(0);
    const b = c.run(put(2));
    await until(() => port.sent.length === 1, 'the batch the plan that is not patient sends', 5_000);
    expect(port.sent[0]!.stmts).toHaveLength(2);
    port.sent[0]!.answer();
    await expect(Promise.all([a, b])).resolves.toEqual([1, 2]);
    const t0 = Date.now();
    const lone = c.run(put(3), { patientMs: 100 });
    await until(() => port.sent.length === 2, 'the patient plan, alone once its time is up', 5_000);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(90);
    port.sent[1]!.answer();
    await expect(lone).resolves.toBe(3);
  });

  it('hands answers out in the order the batches were sent, whatever order they come back in', async () => {
    const { port, db } = setup();
    const c = new Committer(port, { depth: 2 });
    const order: number[] = [];
    const first = c.run(put(1)).then((n) => order.push(n));
    await turn();
    const second = c.run(put(2)).then((n) => order.push(n));
    await turn();
    port.sent[1]!.answer(); // the second runs and answers first
    await turn();
    await turn();
    expect(order).toEqual([]);
    port.sent[0]!.answer();
    await Promise.all([first, second]);
    expect(order).toEqual([1, 2]);
    // Both committed, in the order the store ran them.
    expect(
      db
        .prepare('SELECT n FROM t ORDER BY rowid')
        .all()
        .map((r) => r.n),
    ).toEqual([2, 1]);
  });

  it('a plan run alone waits for the batches in flight, and nothing goes out beside it', async () => {
    const { port } = setup();
    const c = new Committer(port, { depth: 2 });
    const a = c.run(put(1));
    await turn();
    const alone = c.run(put(2), { alone: true });
    await turn();
    expect(port.sent).toHaveLength(1); // a free slot, but the plan waits for the first batch
    port.sent[0]!.answer();
    await a;
    await until(() => port.sent.length === 2, 'the alone batch', 5_000);
    const after = c.run(put(3));
    await turn();
    await turn();
    expect(port.sent).toHaveLength(2); // nothing beside the alone batch
    port.sent[1]!.answer();
    await alone;
    await until(() => port.sent.length === 3, 'the batch after it', 5_000);
    port.sent[2]!.answer();
    await expect(after).resolves.toBe(3);
  });

  it('a plan that breaks its batch fails alone; the others commit', async () => {
    const { port, db } = setup();
    const c = new Committer(port, { depth: 2 });
    const first = c.run(put(0));
    await turn();
    const ok = c.run(put(1));
    const bad = c.run({ stmts: [stmt('INSERT INTO nowhere VALUES (1)')], done: () => 0 });
    const ok2 = c.run(put(2));
    await turn();
    const s = settled(bad);
    port.sent[0]!.answer();
    await first;
    port.sent[1]!.answer(); // the batch of three fails; each is sent again alone
    for (let i = 2; i < 5; i++) {
      await until(() => port.sent.length > i, `retry ${i - 1}`, 5_000);
      port.sent[i]!.answer();
    }
    await expect(ok).resolves.toBe(1);
    await expect(ok2).resolves.toBe(2);
    await expect(bad).rejects.toThrow(/nowhere/);
    expect(s.done).toBe(true);
    expect(
      db
        .prepare('SELECT n FROM t ORDER BY n')
        .all()
        .map((r) => r.n),
    ).toEqual([0, 1, 2]);
  });
});

describe('committer: what the engine remembers, with two batches in flight', () => {
  const NS = 'ns';
  const Q = 'q';
  const engineOn = (port: Port, now: () => number) => new Engine(port, { singleWriter: true, now, committer: { depth: 2 } });

  it('a lease hint is kept when a sweep read that ran before the claim answers after it', async () => {
    const { port } = setup();
    let clock = 1_000_000;
    const engine = engineOn(port, () => clock);
    // Known hints of the queue first (an empty sweep), then a job to claim.
    const sweep0 = engine.work.sweep(NS, Q);
    await until(() => port.sent.length === 1, 'the first sweep', 5_000);
    port.sent[0]!.answer();
    await sweep0;
    const sub = engine.submit(NS, Q, { id: 'j1', envelope: BYTES });
    await until(() => port.sent.length === 2, 'the submit', 5_000);
    port.sent[1]!.answer();
    await sub;
    expect(engine.hints!.get(NS, Q)!.lease).toBeNull();

    // The claim goes out, then the alarm's sweep beside it. The store runs the sweep first (it sees
    // no lease), then the claim; the claim answers and tells its lease; the sweep answers last.
    const claim = engine.work.claimMany(NS, Q, { workerId: 'w', max: 1, leaseMs: 60_000 });
    await until(() => port.sent.length === 3, 'the claim', 5_000);
    const sweep = engine.work.sweep(NS, Q);
    await until(() => port.sent.length === 4, 'the sweep beside it', 5_000);
    port.sent[3]!.run();
    port.sent[2]!.answer();
    const [got] = await claim;
    expect(got!.id).toBe('j1');
    expect(engine.hints!.get(NS, Q)!.lease).toBe(got!.leaseUntil);
    port.sent[3]!.answer();
    await sweep;
    // The sweep read no lease, but the claim's, told since the sweep was planned, stands.
    expect(engine.hints!.get(NS, Q)!.lease).toBe(got!.leaseUntil);
    // So once it runs out, the next claim expires it (a hint later than the truth would skip that).
    clock += 61_000;
    const [back] = await answering(port, engine.work.claimMany(NS, Q, { workerId: 'w2', max: 1 }));
    expect(back).toMatchObject({ id: 'j1', attempt: 2 });
  });

  const ops: [string, (e: Engine) => Promise<unknown>][] = [
    ['a journal append', (e) => e.journal.append(NS, 'j1', { workerId: 'w', attempt: 1, queue: Q, kind: 0, body: BYTES })],
    ['a journal read for a follower', (e) => e.journal.follow(NS, 'j1', 0, 0, undefined, undefined, Q)],
    ['a pause', (e) => e.admin.pause(NS, Q)],
    ['a resume', (e) => e.admin.resume(NS, Q)],
    ['a change of settings', (e) => e.admin.configure(NS, Q, { maxRunning: 5 })],
  ];
  for (const [what, op] of ops) {
    it(`${what} goes out alone`, async () => {
      const { port } = setup();
      const engine = engineOn(port, () => 1_000_000);
      const sub = engine.submit(NS, Q, { id: 'j1', envelope: BYTES });
      await until(() => port.sent.length === 1, 'the submit', 5_000);
      port.sent[0]!.answer();
      await sub;
      const claim = engine.work.claimMany(NS, Q, { workerId: 'w', max: 1 });
      await until(() => port.sent.length === 2, 'the claim', 5_000);
      port.sent[1]!.answer();
      await claim;
      // A batch in flight (a submit), then the operation: it waits for that batch to answer.
      const other = engine.submit(NS, Q, { id: 'j2', envelope: BYTES });
      await until(() => port.sent.length === 3, 'a batch in flight', 5_000);
      const done = op(engine);
      await turn();
      await turn();
      expect(port.sent).toHaveLength(3);
      port.sent[2]!.answer();
      await other;
      // Then it goes (in one batch or a few, each alone).
      await answering(port, done, 3);
    });
  }
});

/** The queue object's engine (hints kept, two batches in flight) over SQLite, every batch it sends kept. */
const setupEngine = (now?: () => number) => {
  const db = new DatabaseSync(':memory:');
  migrate(db);
  const sql = new SqlitePort(db);
  const batches: Stmt[][] = [];
  const port: Port = {
    batch: (stmts) => {
      batches.push(stmts);
      return sql.batch(stmts);
    },
  };
  const engine = new Engine(port, { singleWriter: true, committer: { depth: 2 }, now });
  const state = (id: string) => (db.prepare('SELECT state FROM invocations WHERE id = ?').get(id) as { state: string }).state;
  return { engine, batches, state };
};

describe("a single writer's hints in a claim that may wait", () => {
  it('a claim on a queue with no pause, cap or rate reads no wake statement, and a parked one still looks when a lease runs out', async () => {
    const { engine, batches } = setupEngine();
    const wakeReads = () => batches.flat().filter((s) => s.sql.includes('min(run_at)')).length;
    await engine.submit('ns', 'q', { id: 'j1', envelope: BYTES });
    await engine.submit('ns', 'q', { id: 'j2', envelope: BYTES });
    // The object learns its hints once (an unknown queue reads them with its first claim).
    const [first] = await engine.work.claimMany('ns', 'q', { workerId: 'w1', max: 1, waitMs: 5_000, leaseMs: 400 });
    expect(first!.id).toBe('j1');
    const learned = wakeReads();
    // A claim that finds work does not read what it would wait for.
    const [second] = await engine.work.claimMany('ns', 'q', { workerId: 'w1', max: 1, waitMs: 5_000, leaseMs: 400 });
    expect(second!.id).toBe('j2');
    expect(wakeReads()).toBe(learned);
    // Nor does one that parks: the hints say when the first lease runs out, and it looks then,
    // expires j1 and takes it, long before its own wait ends. Only that look reads the wake
    // statement, to learn the hints afresh after its sweep moved a row.
    const t0 = Date.now();
    const got = await engine.work.claimMany('ns', 'q', { workerId: 'w2', max: 1, waitMs: 5_000 });
    expect(got.map((c) => [c.id, c.attempt])).toEqual([['j1', 2]]);
    expect(Date.now() - t0).toBeLessThan(4_000);
    expect(wakeReads()).toBe(learned + 1);
  });
});

describe("acks of a worker that keeps up ride the next submit's batch", () => {
  /**
   * The object knows the queue's hints (a first claim read them), and a worker kept up: its parked
   * claim was handed the one job a submit queued (it asked for 4).
   */
  async function keptUp(engine: Engine) {
    await engine.submit('ns', 'q', { id: 'j0', envelope: BYTES });
    await engine.work.claimMany('ns', 'q', { workerId: 'w0', max: 1 });
    const parked = engine.work.claimMany('ns', 'q', { workerId: 'w', max: 4, waitMs: 5_000 });
    await until(() => engine.park.waiters.size === 1, 'the parked claim', 5_000);
    await engine.submit('ns', 'q', { id: 'j1', envelope: BYTES });
    const [j1] = await parked;
    expect(j1!.id).toBe('j1');
    return j1!;
  }

  it('a submit within the moment the claim waits carries its acks, the insert and the claim in one batch', async () => {
    // The moment (GATHER_MS, 5 ms) held still: the engine's clock (a worker fed within the moment
    // keeps up) and its timer (how long the claim waits for the submit). On a loaded machine the
    // test's own steps take longer than the moment itself.
    const { engine, batches, state } = setupEngine(() => 1_800_000_000_000);
    const j1 = await keptUp(engine);
    const before = batches.length;
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const out = await (async () => {
      try {
        const round = engine.work.ackAndClaim('ns', 'q', [{ id: 'j1', workerId: 'w', attempt: j1.attempt }], {
          workerId: 'w',
          max: 4,
          waitMs: 5_000,
        });
        await turn(); // the submit comes a moment later
        await engine.submit('ns', 'q', { id: 'j2', envelope: BYTES });
        await vi.runAllTimersAsync();
        return await round;
      } finally {
        vi.useRealTimers();
      }
    })();
    expect(out.acks).toEqual([{ ok: true, value: { absorbed: false } }]);
    expect(out.claimed.map((c) => c.id)).toEqual(['j2']);
    expect(state('j1')).toBe('succeeded');
    expect(batches.length - before).toBe(1);
  });

  it('a worker behind a backlog (its last claim came back full) looks at once; a submit then goes in its own batch', async () => {
    const { engine, batches, state } = setupEngine();
    await keptUp(engine);
    for (const id of ['b1', 'b2', 'b3']) await engine.submit('ns', 'q', { id, envelope: BYTES });
    const full = await engine.work.claimMany('ns', 'q', { workerId: 'w', max: 2, waitMs: 5_000 });
    expect(full.map((c) => c.id)).toEqual(['b1', 'b2']);
    const before = batches.length;
    const round = engine.work.ackAndClaim('ns', 'q', [{ id: 'b1', workerId: 'w', attempt: full[0]!.attempt }], {
      workerId: 'w',
      max: 2,
      waitMs: 5_000,
    });
    await turn();
    await engine.submit('ns', 'q', { id: 'j2', envelope: BYTES });
    const out = await round;
    expect(out.claimed.map((c) => c.id)[0]).toBe('b3');
    expect(state('b1')).toBe('succeeded');
    expect(batches.length - before).toBe(2);
  });

  it('with no submit in that moment, the claim looks, its acks in the same batch', async () => {
    const { engine, batches, state } = setupEngine();
    const j1 = await keptUp(engine);
    const before = batches.length;
    const out = await engine.work.ackAndClaim('ns', 'q', [{ id: 'j1', workerId: 'w', attempt: j1.attempt }], {
      workerId: 'w',
      max: 4,
      waitMs: 5_000,
    });
    expect(out.acks).toEqual([{ ok: true, value: { absorbed: false } }]);
    expect(out.claimed).toEqual([]);
    expect(state('j1')).toBe('succeeded');
    // The look that carried the acks, and nothing else (the claim then waited out its time).
    expect(batches.length - before).toBe(1);
    expect(batches.at(-1)!.some((s) => s.sql.includes("SET state = 'succeeded'"))).toBe(true);
  });
});
