/**
 * Model-based test of the transition core (issue: reliability). fast-check generates sequences
 * of submit, claim, ack, nack, heartbeat, cancel, expire, append and read; each runs against the
 * real engine (the same SQL both planes run) on SQLite, and against a small model of what the
 * contract says must happen. Then fc.scheduler reorders concurrent operations to explore
 * interleavings. A counterexample is a failing test.
 */
import { DatabaseSync } from 'node:sqlite';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SqlitePort } from '../../client/local/sqlite-port.ts';
import { migrate } from '../../client/local/migrate.ts';
import { Engine } from '../../src/core/engine.ts';
import { LakeshoreError } from '../../src/core/errors.ts';
import type { Port, Stmt, StmtResult } from '../../src/core/port.ts';
import { isTerminal, type State } from '../../src/core/states.ts';
import { WORKER_ID } from '../../src/core/sql/workers.ts';

const NS = 'm';
const Q = 'q';
const LEASE = 1_000;
const MAX_ATTEMPTS = 3;
const IDS = ['a', 'b', 'c'];
const WORKERS = ['w1', 'w2'];
const bytes = new Uint8Array([1]);

interface Job {
  state: State;
  attempt: number;
  worker: string | null;
  leaseUntil: number;
  frames: number[];
  /** While delayed: when it comes due. */
  runAt: number;
  /** Attempts spent before its last retry (or not charged by a release): the budget counts from here. */
  budgetFrom: number;
  /** The result its successful ack wrote. */
  result: string | null;
}
interface Model {
  jobs: Map<string, Job>;
  paused: boolean;
  /** The queue's running cap, or null. */
  cap: number | null;
}
interface Real {
  engine: Engine;
  clock: { now: number };
  db: DatabaseSync;
}

function fresh(): Real {
  const db = new DatabaseSync(':memory:');
  migrate(db);
  const clock = { now: 1_000_000 };
  const engine = new Engine(new SqlitePort(db), {
    now: () => clock.now,
    limits: { defaultLeaseMs: LEASE, defaultMaxAttempts: MAX_ATTEMPTS },
  });
  return { engine, clock, db };
}

const code = async (p: Promise<unknown>): Promise<string> => {
  try {
    await p;
    return 'ok';
  } catch (e) {
    if (e instanceof LakeshoreError) return e.code;
    throw e;
  }
};

/** The fencing rule as the contract states it: running, this worker's attempt (when named), and its lease not run out. */
const holds = (j: Job | undefined, w: string, attempt: number | null, now: number) =>
  !!j && j.state === 'running' && j.worker === w && (attempt === null || j.attempt === attempt) && j.leaseUntil > now;
/** The result a holder writes: one per holder, so a row that succeeded says whose ack landed. */
const resultOf = (w: string, attempt: number | null) => `${w}@${attempt ?? '*'}`;
const text = new TextEncoder();

/**
 * The rows as the store holds them, in the model's terms. Compared with the model after every
 * command, so a refused write that changed a row (a 409 answered after a wrong UPDATE ran) fails
 * here even when its answer was right.
 */
function realRows(
  r: Real,
): Map<string, Pick<Job, 'state' | 'attempt' | 'worker' | 'result'> & { leaseUntil: number | null; finished: boolean }> {
  const rows = r.db
    .prepare(
      `SELECT id, state, attempt, ${WORKER_ID}, CAST(result AS TEXT) AS result, lease_until, finished_at FROM invocations WHERE ns = ? ORDER BY rid`,
    )
    .all(NS) as {
    id: string;
    state: State;
    attempt: number;
    worker_id: string | null;
    result: string | null;
    lease_until: number | null;
    finished_at: number | null;
  }[];
  return new Map(
    rows.map((x) => [
      x.id,
      {
        state: x.state,
        attempt: x.attempt,
        worker: x.worker_id,
        result: x.result,
        leaseUntil: x.lease_until,
        finished: x.finished_at !== null,
      },
    ]),
  );
}
function agree(m: Model, r: Real, after: string) {
  const real = realRows(r);
  expect([...real.keys()], `ids after ${after}`).toEqual([...m.jobs.keys()]);
  for (const [id, j] of m.jobs) {
    const row = real.get(id)!;
    // A row has a lease only while it runs: with it, the guard's lease term alone keeps every
    // other state out (fence.ts).
    const want = {
      state: j.state,
      attempt: j.attempt,
      worker: j.worker,
      result: j.state === 'succeeded' ? j.result : null,
      leaseUntil: j.state === 'running' ? j.leaseUntil : null,
      // A row has finished_at exactly while it is finished: every statement that finishes a job,
      // or takes one back, sets it, which journals_due's triggers (migration 0017) rely on.
      finished: isTerminal(j.state),
    };
    expect(row, `${id} after ${after}`).toEqual(want);
  }
}

/** Claim order is fifo: the model expects the oldest queued job (a promoted job keeps its place: submit order). */
const order = (m: Model) => [...m.jobs.entries()].filter(([, j]) => j.state === 'queued').map(([id]) => id);
const running = (m: Model) => [...m.jobs.values()].filter((j) => j.state === 'running').length;

/** Every command checks the store's rows against the model once it ran (agree). */
abstract class Step implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  abstract step(m: Model, r: Real): Promise<void>;
  async run(m: Model, r: Real) {
    await this.step(m, r);
    agree(m, r, this.toString());
  }
  abstract toString(): string;
}

class Submit extends Step {
  readonly id: string;
  readonly delayMs: number;
  constructor(id: string, delayMs: number) {
    super();
    this.id = id;
    this.delayMs = delayMs;
  }
  async step(m: Model, r: Real) {
    const out = await r.engine.submit(NS, Q, { id: this.id, envelope: bytes, delayMs: this.delayMs || undefined });
    expect(out.created).toBe(!m.jobs.has(this.id));
    if (!m.jobs.has(this.id)) {
      m.jobs.set(this.id, {
        state: this.delayMs ? 'delayed' : 'queued',
        attempt: 0,
        worker: null,
        leaseUntil: 0,
        frames: [],
        runAt: r.clock.now + this.delayMs,
        budgetFrom: 0,
        result: null,
      });
    }
  }
  toString = () => `submit(${this.id}${this.delayMs ? `, delay ${this.delayMs}` : ''})`;
}

/** The model's claim of up to `max` jobs by `worker`: what the plane must hand out, in order. */
function claimModel(m: Model, now: number, worker: string, max: number): string[] {
  expireModel(m, now); // claims reclaim expired leases and promote due jobs themselves
  if (m.paused) return [];
  const room = m.cap === null ? max : Math.max(0, Math.min(max, m.cap - running(m)));
  const take = order(m).slice(0, room);
  for (const id of take) {
    const j = m.jobs.get(id)!;
    expect(j.runAt, 'nothing is claimable before it is due').toBeLessThanOrEqual(now);
    Object.assign(j, { state: 'running', attempt: j.attempt + 1, worker, leaseUntil: now + LEASE });
  }
  return take;
}

class Claim extends Step {
  readonly worker: string;
  constructor(worker: string) {
    super();
    this.worker = worker;
  }
  async step(m: Model, r: Real) {
    const got = await r.engine.work.claim(NS, Q, { workerId: this.worker });
    const expected = claimModel(m, r.clock.now, this.worker, 1);
    expect(got?.id ?? null).toBe(expected[0] ?? null);
    if (got) expect(got.attempt).toBe(m.jobs.get(got.id)!.attempt);
    if (got && m.cap !== null)
      expect(await r.engine.count(NS, Q, 'running'), 'never more than max_running running').toBeLessThanOrEqual(m.cap);
  }
  toString = () => `claim(${this.worker})`;
}

/** One ack item as a worker sends it: its own id, its worker, and an attempt relative to the row's (-1: a stale one; null: none named). */
type AckSpec = readonly [id: string, worker: string, attemptDelta: number | null];
const attemptFor = (m: Model, [id, , d]: AckSpec) => (d === null ? null : Math.max(0, (m.jobs.get(id)?.attempt ?? 0) + d));

/**
 * What the contract answers an ack, and what it does to the model: the holder's ack succeeds
 * (with its result); a repeat of an ack that landed is absorbed; anything else is refused and
 * changes nothing (agree checks the rows).
 */
function ackModel(m: Model, now: number, id: string, w: string, attempt: number | null): string {
  const j = m.jobs.get(id);
  if (!j) return 'not_found';
  if (holds(j, w, attempt, now)) {
    Object.assign(j, { state: 'succeeded', result: resultOf(w, attempt) });
    return 'ok';
  }
  if (j.state === 'succeeded' && j.worker === w && (attempt === null || j.attempt === attempt)) return 'ok'; // a retried ack is absorbed
  return 'conflict';
}

class Ack extends Step {
  readonly spec: AckSpec;
  constructor(spec: AckSpec) {
    super();
    this.spec = spec;
  }
  async step(m: Model, r: Real) {
    const [id, w] = this.spec;
    const attempt = attemptFor(m, this.spec);
    const c = await code(
      r.engine.work.ack(NS, id, { workerId: w, attempt: attempt ?? undefined, result: text.encode(resultOf(w, attempt)) }),
    );
    expect(c).toBe(ackModel(m, r.clock.now, id, w, attempt));
  }
  toString = () => `ack(${this.spec.join(', ')})`;
}

const ackItems = (m: Model, specs: readonly AckSpec[]) =>
  specs.map((s) => {
    const attempt = attemptFor(m, s);
    return { id: s[0], workerId: s[1], attempt: attempt ?? undefined, result: text.encode(resultOf(s[1], attempt)) };
  });
const settledCode = (a: { ok: true } | { ok: false; error: { code: string } }) => (a.ok ? 'ok' : a.error.code);

/** Several acks in one call (the set-based statement the Node worker and HttpDispatch's batching use): each item fenced on its own. */
class AckMany extends Step {
  readonly specs: readonly AckSpec[];
  constructor(specs: readonly AckSpec[]) {
    super();
    this.specs = specs;
  }
  async step(m: Model, r: Real) {
    const items = ackItems(m, this.specs);
    const got = await r.engine.work.ackMany(NS, items);
    const want = items.map((it) => ackModel(m, r.clock.now, it.id, it.workerId, it.attempt ?? null));
    expect(got.map(settledCode)).toEqual(want);
  }
  toString = () => `ackMany(${this.specs.map((s) => `[${s.join(', ')}]`).join(' ')})`;
}

/** A worker's acks and its next claim in one call: the acks land, then the claim takes what they left. */
class AckAndClaim extends Step {
  readonly worker: string;
  readonly specs: readonly AckSpec[];
  readonly max: number;
  constructor(worker: string, specs: readonly AckSpec[], max: number) {
    super();
    this.worker = worker;
    this.specs = specs;
    this.max = max;
  }
  async step(m: Model, r: Real) {
    const items = ackItems(
      m,
      this.specs.map(([id, , d]) => [id, this.worker, d] as const),
    );
    const got = await r.engine.work.ackAndClaim(NS, Q, items, { workerId: this.worker, max: this.max });
    expect(got.acks.map(settledCode)).toEqual(items.map((it) => ackModel(m, r.clock.now, it.id, it.workerId, it.attempt ?? null)));
    expect(got.claimed.map((c) => c.id)).toEqual(claimModel(m, r.clock.now, this.worker, this.max));
  }
  toString = () => `ackAndClaim(${this.worker}, ${this.specs.map(([id, , d]) => `[${id}, ${d}]`).join(' ')}, max ${this.max})`;
}

/** A claim whose answer never reached its worker, given back: queued again, its attempt not charged. */
class Release extends Step {
  readonly spec: AckSpec;
  constructor(spec: AckSpec) {
    super();
    this.spec = spec;
  }
  async step(m: Model, r: Real) {
    const [id, w] = this.spec;
    const attempt = attemptFor(m, this.spec) ?? 0;
    const back = await r.engine.work.release(NS, Q, w, [{ id, attempt }]);
    const j = m.jobs.get(id);
    if (holds(j, w, attempt, r.clock.now)) {
      Object.assign(j!, { state: 'queued', budgetFrom: j!.budgetFrom + 1 });
      expect(back).toEqual([id]);
    } else expect(back).toEqual([]);
  }
  toString = () => `release(${this.spec.join(', ')})`;
}

class Nack extends Step {
  readonly id: string;
  readonly worker: string;
  readonly retry: boolean;
  constructor(id: string, worker: string, retry: boolean) {
    super();
    this.id = id;
    this.worker = worker;
    this.retry = retry;
  }
  async step(m: Model, r: Real) {
    const j = m.jobs.get(this.id);
    const c = await code(r.engine.work.nack(NS, this.id, { workerId: this.worker, attempt: j?.attempt, error: 'x', retry: this.retry }));
    const to: State = this.retry ? 'queued' : 'failed';
    if (!j) expect(c).toBe('not_found');
    else if (holds(j, this.worker, j.attempt, r.clock.now)) {
      expect(c).toBe('ok');
      // A requeued row keeps its place in submit order, as the model's Map does; a retry on the
      // last attempt fails the row (one attempt budget for nacks and leases).
      j.state = this.retry && j.attempt - j.budgetFrom >= MAX_ATTEMPTS ? 'failed' : to;
    } else if ((j.state === to || (this.retry && j.state === 'failed')) && j.worker === this.worker) expect(c).toBe('ok');
    else expect(c).toBe('conflict');
  }
  toString = () => `nack(${this.id}, ${this.worker}, retry=${this.retry})`;
}

class Heartbeat extends Step {
  readonly id: string;
  readonly worker: string;
  constructor(id: string, worker: string) {
    super();
    this.id = id;
    this.worker = worker;
  }
  async step(m: Model, r: Real) {
    const j = m.jobs.get(this.id);
    let out: { cancelled: boolean } | string;
    try {
      out = await r.engine.work.heartbeat(NS, this.id, { workerId: this.worker, attempt: j?.attempt });
    } catch (e) {
      out = (e as LakeshoreError).code;
    }
    if (!j) expect(out).toBe('not_found');
    else if (holds(j, this.worker, j.attempt, r.clock.now)) {
      expect(out).toMatchObject({ cancelled: false });
      j.leaseUntil = r.clock.now + LEASE;
    } else if (j.state === 'cancelled' && j.worker === this.worker) expect(out).toEqual({ leaseUntil: null, cancelled: true });
    else expect(out).toBe('conflict');
  }
  toString = () => `heartbeat(${this.id}, ${this.worker})`;
}

class Cancel extends Step {
  readonly id: string;
  constructor(id: string) {
    super();
    this.id = id;
  }
  async step(m: Model, r: Real) {
    const j = m.jobs.get(this.id);
    const waiting = (s: State | undefined) => s === 'delayed' || s === 'queued' || s === 'running';
    const c = await code(r.engine.cancel(NS, this.id).then((v) => expect(v).toBe(waiting(j?.state))));
    if (!j) return expect(c).toBe('not_found');
    expect(c).toBe('ok');
    if (waiting(j.state)) j.state = 'cancelled';
  }
  toString = () => `cancel(${this.id})`;
}

function expireModel(m: Model, now: number) {
  for (const j of m.jobs.values()) {
    if (j.state === 'running' && j.leaseUntil <= now) j.state = j.attempt - j.budgetFrom >= MAX_ATTEMPTS ? 'failed' : 'queued';
    if (j.state === 'delayed' && j.runAt <= now) j.state = 'queued';
  }
}

class Retry extends Step {
  readonly id: string;
  constructor(id: string) {
    super();
    this.id = id;
  }
  async step(m: Model, r: Real) {
    const j = m.jobs.get(this.id);
    const c = await code(r.engine.retry(NS, this.id));
    if (!j) return expect(c).toBe('not_found');
    expect(c).toBe(j.state === 'failed' ? 'ok' : 'conflict');
    if (c === 'ok') {
      j.state = 'queued';
      j.budgetFrom = j.attempt; // a fresh budget; a stale worker of an earlier attempt stays fenced (Ack, Nack, Append)
    }
  }
  toString = () => `retry(${this.id})`;
}

class Pause extends Step {
  readonly paused: boolean;
  constructor(paused: boolean) {
    super();
    this.paused = paused;
  }
  async step(m: Model, r: Real) {
    await (this.paused ? r.engine.admin.pause(NS, Q) : r.engine.admin.resume(NS, Q));
    m.paused = this.paused;
  }
  toString = () => (this.paused ? 'pause()' : 'resume()');
}

class Cap extends Step {
  readonly cap: number | null;
  constructor(cap: number | null) {
    super();
    this.cap = cap;
  }
  async step(m: Model, r: Real) {
    await r.engine.admin.configure(NS, Q, { maxRunning: this.cap });
    m.cap = this.cap;
  }
  toString = () => `cap(${this.cap})`;
}

/** Time passes and the queue's sweep runs (the alarm's work). */
class Expire extends Step {
  readonly advance: number;
  constructor(advance: number) {
    super();
    this.advance = advance;
  }
  async step(m: Model, r: Real) {
    r.clock.now += this.advance;
    await r.engine.work.sweep(NS, Q);
    expireModel(m, r.clock.now);
  }
  toString = () => `expire(+${this.advance}ms)`;
}

/** Time passes and nothing sweeps: a lease may have run out on a row still running (before the alarm fires). */
class Tick extends Step {
  readonly advance: number;
  constructor(advance: number) {
    super();
    this.advance = advance;
  }
  async step(_m: Model, r: Real) {
    r.clock.now += this.advance;
  }
  toString = () => `tick(+${this.advance}ms)`;
}

class Append extends Step {
  readonly id: string;
  readonly worker: string;
  readonly seq: number;
  constructor(id: string, worker: string, seq: number) {
    super();
    this.id = id;
    this.worker = worker;
    this.seq = seq;
  }
  async step(m: Model, r: Real) {
    const j = m.jobs.get(this.id);
    const c = await code(
      r.engine.journal.append(NS, this.id, { workerId: this.worker, attempt: j?.attempt, seq: this.seq, kind: 0, body: bytes }),
    );
    if (!j) return expect(c).toBe('not_found');
    if (j.frames.includes(this.seq) && j.worker === this.worker) return expect(['ok', 'conflict']).toContain(c); // absorbed (same attempt) or written by another attempt
    if (holds(j, this.worker, j.attempt, r.clock.now) && this.seq > Math.max(-1, ...j.frames)) {
      expect(c).toBe('ok');
      j.frames.push(this.seq);
    } else expect(c).toBe('conflict'); // not the holder, or a seq behind the journal's last
  }
  toString = () => `append(${this.id}, ${this.worker}, seq ${this.seq})`;
}

class Read extends Step {
  readonly id: string;
  constructor(id: string) {
    super();
    this.id = id;
  }
  async step(m: Model, r: Real) {
    const j = m.jobs.get(this.id);
    const c = await code(
      r.engine.journal.read(NS, this.id, -1).then((page) => {
        expect(page.frames.map((f) => f.seq)).toEqual([...j!.frames].sort((a, b) => a - b));
        expect(page.state).toBe(j!.state);
      }),
    );
    expect(c).toBe(j ? 'ok' : 'not_found');
  }
  toString = () => `read(${this.id})`;
}

const id = fc.constantFrom(...IDS);
const worker = fc.constantFrom(...WORKERS);
const ackSpec = fc.tuple(id, worker, fc.constantFrom<number | null>(0, 0, 0, -1, null));
const commands = [
  fc.tuple(id, fc.constantFrom(0, 0, 500, 2_000)).map(([i, d]) => new Submit(i, d)),
  id.map((i) => new Retry(i)),
  fc.boolean().map((p) => new Pause(p)),
  fc.constantFrom(null, 1, 2).map((c) => new Cap(c)),
  worker.map((w) => new Claim(w)),
  ackSpec.map((a) => new Ack(a)),
  fc.array(ackSpec, { minLength: 2, maxLength: 4 }).map((a) => new AckMany(a)),
  fc.tuple(worker, fc.array(ackSpec, { minLength: 1, maxLength: 3 }), fc.constantFrom(1, 2)).map(([w, a, n]) => new AckAndClaim(w, a, n)),
  fc.tuple(id, worker, fc.constantFrom(0, 0, -1)).map(([i, w, d]) => new Release([i, w, d])),
  fc.tuple(id, worker, fc.boolean()).map(([i, w, r]) => new Nack(i, w, r)),
  fc.tuple(id, worker).map(([i, w]) => new Heartbeat(i, w)),
  id.map((i) => new Cancel(i)),
  fc.constantFrom(10, 500, 1_500).map((a) => new Expire(a)),
  fc.constantFrom(400, 1_000).map((a) => new Tick(a)),
  fc.tuple(id, worker, fc.integer({ min: 0, max: 3 })).map(([i, w, s]) => new Append(i, w, s)),
  id.map((i) => new Read(i)),
];

async function checkCounts(m: Model, r: Real) {
  for (const s of ['delayed', 'queued', 'running', 'succeeded', 'failed', 'cancelled'] as const) {
    expect(await r.engine.count(NS, Q, s), s).toBe([...m.jobs.values()].filter((j) => j.state === s).length);
  }
}

describe('model-based: the transition core against a model of the contract', () => {
  it('agrees with the model on every generated sequence (counterexamples: 0)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { size: '+1' }), async (cmds) => {
        const real = fresh();
        const model: Model = { jobs: new Map(), paused: false, cap: null };
        await fc.asyncModelRun(() => ({ model, real }), cmds);
        await checkCounts(model, real);
      }),
      { numRuns: Number(process.env.MODEL_RUNS ?? 300) },
    );
  }, 120_000);

  it('hands a job to a new holder only once the last one let it go or its lease ran out, and never moves a terminal row back, under any interleaving of concurrent calls', async () => {
    await interleaved(false);
  }, 120_000);

  it("the same with the queue object's committer: hints kept, two batches in flight, each batch run and answered when the scheduler says, so the store may apply them in either order", async () => {
    await interleaved(true);
  }, 120_000);
});

/**
 * A port whose batches, once `s` is set, run and answer when the scheduler says: two batches in
 * flight may run in either order, and answer in either order (committer.ts must cope).
 */
class ScheduledPort implements Port {
  s: fc.Scheduler | null = null;
  private readonly db: SqlitePort;
  constructor(db: SqlitePort) {
    this.db = db;
  }
  async batch(stmts: Stmt[]): Promise<StmtResult[]> {
    if (!this.s) return this.db.batch(stmts);
    await this.s.schedule(Promise.resolve(), 'store runs a batch');
    const out = this.db.batchSync(stmts);
    return this.s.schedule(Promise.resolve(out), 'store answers it');
  }
}

async function interleaved(pipelined: boolean): Promise<void> {
  await fc.assert(
    fc.asyncProperty(
      fc.scheduler(),
      fc.array(fc.constantFrom('claim', 'claim', 'ack', 'nack', 'cancel', 'expire', 'heartbeat'), { minLength: 4, maxLength: 24 }),
      async (s, ops) => {
        const db = new DatabaseSync(':memory:');
        migrate(db);
        // Every change of state, in the order the store made them (the truth when batches in
        // flight may run in an order other than the one they were planned in).
        db.exec(`CREATE TABLE moves (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT, old_state TEXT, new_state TEXT, old_attempt INT, new_attempt INT, old_lease INT, at INT);
          CREATE TRIGGER moves_log AFTER UPDATE OF state ON invocations WHEN old.state <> new.state BEGIN
            INSERT INTO moves (id, old_state, new_state, old_attempt, new_attempt, old_lease, at)
            VALUES (new.id, old.state, new.state, old.attempt, new.attempt, old.lease_until, new.updated_at); END;`);
        const clock = { now: 1_000_000 };
        const port = new ScheduledPort(new SqlitePort(db));
        const engine = new Engine(port, {
          now: () => clock.now,
          limits: { defaultLeaseMs: LEASE, defaultMaxAttempts: MAX_ATTEMPTS },
          ...(pipelined ? { singleWriter: true, committer: { depth: 2 } } : {}),
        });
        for (const i of IDS) await engine.submit(NS, Q, { id: i, envelope: bytes });
        if (pipelined) port.s = s;
        // Per job and attempt: when it was handed out, until when its holder's lease ran (claim,
        // then each heartbeat that landed), and whether the holder let it go (an ack or nack that landed).
        const attempts = new Map<string, { at: number; until: number; released: boolean; w: string }>();
        const held = new Map<string, { w: string; attempt: number }>();
        const terminal = new Map<string, State>();
        const tasks = ops.map((op, n) =>
          s.schedule(Promise.resolve(op), `${op}#${n}`).then(async () => {
            const w = WORKERS[n % 2]!;
            if (op === 'claim') {
              const c = await engine.work.claim(NS, Q, { workerId: w });
              if (c) {
                attempts.set(`${c.id}@${c.attempt}`, { at: c.leaseUntil - LEASE, until: c.leaseUntil, released: false, w });
                held.set(c.id, { w, attempt: c.attempt });
              }
            } else if (op === 'expire') {
              clock.now += 2 * LEASE;
              await engine.work.sweep(NS, Q);
            } else {
              const target = [...held.entries()][n % Math.max(1, held.size)];
              if (!target) return;
              const [inv, h] = target;
              const mine = attempts.get(`${inv}@${h.attempt}`)!;
              if (op === 'ack' || op === 'nack') {
                const call =
                  op === 'ack'
                    ? engine.work.ack(NS, inv, { workerId: h.w, attempt: h.attempt })
                    : engine.work.nack(NS, inv, { workerId: h.w, attempt: h.attempt, error: 'x' });
                if ((await code(call)) === 'ok') mine.released = true;
              } else if (op === 'heartbeat') {
                const hb = await engine.work.heartbeat(NS, inv, { workerId: h.w, attempt: h.attempt }).catch(() => null);
                if (hb?.leaseUntil) mine.until = Math.max(mine.until, hb.leaseUntil);
              } else await code(engine.cancel(NS, inv));
            }
            for (const i of IDS) {
              // A read begun after another read answered a terminal state answers the same one
              // (reads in flight together may answer in either order of the store's).
              const was = terminal.get(i);
              const row = (await engine.get(NS, i))!;
              if (was) expect(row.state, `${i} was ${was}`).toBe(was);
              if (row.state === 'succeeded' || row.state === 'failed' || row.state === 'cancelled') terminal.set(i, row.state);
            }
          }),
        );
        // Release scheduled steps until every call has answered: a step may schedule the next
        // only some microtasks later (the committer's turn), so waitAll runs again after each drain.
        let done = false;
        const all = Promise.all(tasks).finally(() => (done = true));
        for (let turns = 0; !done; turns++) {
          if (turns > 10_000) throw new Error('the calls never answered: a batch is waiting for nothing');
          await s.waitAll();
          await new Promise((r) => setImmediate(r));
        }
        await all;
        port.s = null;
        // The real invariant: at every moment at most one worker holds an unexpired lease on a job.
        // In the store's order: attempt k+1 starts only after attempt k left running, and, unless
        // its holder let it go, by an expiry at or after its lease's end (heartbeats included).
        const moves = db.prepare('SELECT * FROM moves ORDER BY seq').all() as {
          id: string;
          old_state: string;
          new_state: string;
          old_attempt: number;
          new_attempt: number;
          old_lease: number | null;
          at: number;
        }[];
        const out = new Map<string, { attempt: number; at: number; lease: number | null }>();
        for (const m of moves) {
          expect(['succeeded', 'failed', 'cancelled'], `${m.id} moved from ${m.old_state} to ${m.new_state}`).not.toContain(m.old_state);
          if (m.new_state === 'running') {
            const last = out.get(m.id);
            if (m.new_attempt > 1) {
              expect(last?.attempt, `${m.id}: attempt ${m.new_attempt} started before attempt ${m.new_attempt - 1} left running`).toBe(
                m.new_attempt - 1,
              );
              if (!attempts.get(`${m.id}@${last!.attempt}`)?.released)
                expect(
                  last!.at,
                  `${m.id}: attempt ${last!.attempt} moved out at ${last!.at}, before its lease ran out at ${last!.lease}`,
                ).toBeGreaterThanOrEqual(last!.lease ?? 0);
            }
            out.delete(m.id);
          } else if (m.old_state === 'running') out.set(m.id, { attempt: m.old_attempt, at: m.at, lease: m.old_lease });
        }
        // With one batch at a time the store's order is the order calls were planned in, so the
        // same holds in the clock of the plans: attempt k+1 was planned after attempt k's lease ended.
        if (!pipelined)
          for (const [key, next] of attempts) {
            const [id, k] = key.split('@') as [string, string];
            if (Number(k) < 2) continue;
            const prev = attempts.get(`${id}@${Number(k) - 1}`);
            if (!prev) continue;
            expect(
              prev.released || next.at >= prev.until,
              `${id}: attempt ${k} went to ${next.w} at ${next.at} while attempt ${Number(k) - 1} of ${prev.w} held a lease until ${prev.until}`,
            ).toBe(true);
          }
        // A single writer's hints are never later than the rows (hints.ts): else a claim would skip
        // an expiry or a promotion that is due.
        const hint = engine.hints?.get(NS, Q);
        if (hint) {
          const rows = await Promise.all(IDS.map((i) => engine.get(NS, i)));
          const earliest = (xs: (number | null | undefined)[]) => Math.min(...xs.filter((x): x is number => typeof x === 'number'));
          const lease = earliest(rows.filter((r) => r?.state === 'running').map((r) => r!.leaseUntil));
          const due = earliest(rows.filter((r) => r?.state === 'delayed').map((r) => r!.runAt));
          if (lease < Infinity) expect(hint.lease ?? Infinity, 'the lease hint').toBeLessThanOrEqual(lease);
          if (due < Infinity) expect(hint.due ?? Infinity, 'the due hint').toBeLessThanOrEqual(due);
        }
      },
    ),
    { numRuns: Number(process.env.MODEL_RUNS ?? 200) },
  );
}
