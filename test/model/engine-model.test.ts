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
import type { State } from '../../src/core/states.ts';

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
}
interface Model {
  jobs: Map<string, Job>;
}
interface Real {
  engine: Engine;
  clock: { now: number };
}

function fresh(): Real {
  const db = new DatabaseSync(':memory:');
  migrate(db);
  const clock = { now: 1_000_000 };
  const engine = new Engine(new SqlitePort(db), { now: () => clock.now, limits: { defaultLeaseMs: LEASE, defaultMaxAttempts: MAX_ATTEMPTS } });
  return { engine, clock };
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

const holds = (j: Job | undefined, w: string, attempt: number) => !!j && j.state === 'running' && j.worker === w && j.attempt === attempt;

/** Claim order is fifo: the model expects the oldest queued job. */
const order = (m: Model) => [...m.jobs.entries()].filter(([, j]) => j.state === 'queued').map(([id]) => id);

class Submit implements fc.AsyncCommand<Model, Real> {
  readonly id: string;
  constructor(id: string) {
    this.id = id;
  }
  check = () => true;
  async run(m: Model, r: Real) {
    const out = await r.engine.submit(NS, Q, { id: this.id, envelope: bytes });
    expect(out.created).toBe(!m.jobs.has(this.id));
    if (!m.jobs.has(this.id)) m.jobs.set(this.id, { state: 'queued', attempt: 0, worker: null, leaseUntil: 0, frames: [] });
  }
  toString = () => `submit(${this.id})`;
}

class Claim implements fc.AsyncCommand<Model, Real> {
  readonly worker: string;
  constructor(worker: string) {
    this.worker = worker;
  }
  check = () => true;
  async run(m: Model, r: Real) {
    expireModel(m, r.clock.now); // claims reclaim expired leases themselves
    const expected = order(m)[0];
    const got = await r.engine.work.claim(NS, Q, { workerId: this.worker });
    expect(got?.id ?? null).toBe(expected ?? null);
    if (got) {
      const j = m.jobs.get(got.id)!;
      j.state = 'running';
      j.attempt++;
      j.worker = this.worker;
      j.leaseUntil = r.clock.now + LEASE;
      expect(got.attempt).toBe(j.attempt);
    }
  }
  toString = () => `claim(${this.worker})`;
}

class Ack implements fc.AsyncCommand<Model, Real> {
  readonly id: string;
  readonly worker: string;
  readonly attemptDelta: number;
  constructor(id: string, worker: string, attemptDelta: number) {
    this.id = id;
    this.worker = worker;
    this.attemptDelta = attemptDelta;
  }
  check = () => true;
  async run(m: Model, r: Real) {
    const j = m.jobs.get(this.id);
    // attemptDelta -1 plays a stale attempt of the same worker id.
    const attempt = Math.max(0, (j?.attempt ?? 0) + this.attemptDelta);
    const before = j && { ...j };
    const c = await code(r.engine.work.ack(NS, this.id, { workerId: this.worker, attempt }));
    if (!j) expect(c).toBe('not_found');
    else if (holds(j, this.worker, attempt)) {
      expect(c).toBe('ok');
      j.state = 'succeeded';
    } else if (j.state === 'succeeded' && j.worker === this.worker && j.attempt === attempt) expect(c).toBe('ok'); // a retried ack is absorbed
    else {
      expect(c).toBe('conflict');
      expect(j).toEqual(before);
    }
  }
  toString = () => `ack(${this.id}, ${this.worker}, ${this.attemptDelta})`;
}

class Nack implements fc.AsyncCommand<Model, Real> {
  readonly id: string;
  readonly worker: string;
  readonly retry: boolean;
  constructor(id: string, worker: string, retry: boolean) {
    this.id = id;
    this.worker = worker;
    this.retry = retry;
  }
  check = () => true;
  async run(m: Model, r: Real) {
    const j = m.jobs.get(this.id);
    const c = await code(r.engine.work.nack(NS, this.id, { workerId: this.worker, attempt: j?.attempt, error: 'x', retry: this.retry }));
    const to: State = this.retry ? 'queued' : 'failed';
    if (!j) expect(c).toBe('not_found');
    else if (holds(j, this.worker, j.attempt)) {
      expect(c).toBe('ok');
      // A requeued row keeps its place in submit order, as the model's Map does; a retry on the
      // last attempt fails the row (one attempt budget for nacks and leases).
      j.state = this.retry && j.attempt >= MAX_ATTEMPTS ? 'failed' : to;
    } else if ((j.state === to || (this.retry && j.state === 'failed')) && j.worker === this.worker) expect(c).toBe('ok');
    else expect(c).toBe('conflict');
  }
  toString = () => `nack(${this.id}, ${this.worker}, retry=${this.retry})`;
}

class Heartbeat implements fc.AsyncCommand<Model, Real> {
  readonly id: string;
  readonly worker: string;
  constructor(id: string, worker: string) {
    this.id = id;
    this.worker = worker;
  }
  check = () => true;
  async run(m: Model, r: Real) {
    const j = m.jobs.get(this.id);
    let out: { cancelled: boolean } | string;
    try {
      out = await r.engine.work.heartbeat(NS, this.id, { workerId: this.worker, attempt: j?.attempt });
    } catch (e) {
      out = (e as LakeshoreError).code;
    }
    if (!j) expect(out).toBe('not_found');
    else if (holds(j, this.worker, j.attempt)) {
      expect(out).toMatchObject({ cancelled: false });
      j.leaseUntil = r.clock.now + LEASE;
    } else if (j.state === 'cancelled' && j.worker === this.worker) expect(out).toEqual({ leaseUntil: null, cancelled: true });
    else expect(out).toBe('conflict');
  }
  toString = () => `heartbeat(${this.id}, ${this.worker})`;
}

class Cancel implements fc.AsyncCommand<Model, Real> {
  readonly id: string;
  constructor(id: string) {
    this.id = id;
  }
  check = () => true;
  async run(m: Model, r: Real) {
    const j = m.jobs.get(this.id);
    const c = await code(r.engine.cancel(NS, this.id).then((v) => expect(v).toBe(!!j && (j.state === 'queued' || j.state === 'running'))));
    if (!j) return expect(c).toBe('not_found');
    expect(c).toBe('ok');
    if (j.state === 'queued' || j.state === 'running') j.state = 'cancelled';
  }
  toString = () => `cancel(${this.id})`;
}

function expireModel(m: Model, now: number) {
  for (const j of m.jobs.values()) {
    if (j.state === 'running' && j.leaseUntil <= now) j.state = j.attempt >= MAX_ATTEMPTS ? 'failed' : 'queued';
  }
}

class Expire implements fc.AsyncCommand<Model, Real> {
  readonly advance: number;
  constructor(advance: number) {
    this.advance = advance;
  }
  check = () => true;
  async run(m: Model, r: Real) {
    r.clock.now += this.advance;
    await r.engine.work.sweep(NS, Q);
    expireModel(m, r.clock.now);
  }
  toString = () => `expire(+${this.advance}ms)`;
}

class Append implements fc.AsyncCommand<Model, Real> {
  readonly id: string;
  readonly worker: string;
  readonly seq: number;
  constructor(id: string, worker: string, seq: number) {
    this.id = id;
    this.worker = worker;
    this.seq = seq;
  }
  check = () => true;
  async run(m: Model, r: Real) {
    const j = m.jobs.get(this.id);
    const c = await code(r.engine.journal.append(NS, this.id, { workerId: this.worker, attempt: j?.attempt, seq: this.seq, kind: 0, body: bytes }));
    if (!j) return expect(c).toBe('not_found');
    if (j.frames.includes(this.seq) && j.worker === this.worker) return expect(['ok', 'conflict']).toContain(c); // absorbed (same attempt) or written by another attempt
    if (holds(j, this.worker, j.attempt) && this.seq > Math.max(-1, ...j.frames)) {
      expect(c).toBe('ok');
      j.frames.push(this.seq);
    } else expect(c).toBe('conflict'); // not the holder, or a seq behind the journal's last
  }
  toString = () => `append(${this.id}, ${this.worker}, seq ${this.seq})`;
}

class Read implements fc.AsyncCommand<Model, Real> {
  readonly id: string;
  constructor(id: string) {
    this.id = id;
  }
  check = () => true;
  async run(m: Model, r: Real) {
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
const commands = [
  id.map((i) => new Submit(i)),
  worker.map((w) => new Claim(w)),
  fc.tuple(id, worker, fc.constantFrom(0, 0, 0, -1)).map(([i, w, d]) => new Ack(i, w, d)),
  fc.tuple(id, worker, fc.boolean()).map(([i, w, r]) => new Nack(i, w, r)),
  fc.tuple(id, worker).map(([i, w]) => new Heartbeat(i, w)),
  id.map((i) => new Cancel(i)),
  fc.constantFrom(10, 500, 1_500).map((a) => new Expire(a)),
  fc.tuple(id, worker, fc.integer({ min: 0, max: 3 })).map(([i, w, s]) => new Append(i, w, s)),
  id.map((i) => new Read(i)),
];

async function checkCounts(m: Model, r: Real) {
  for (const s of ['queued', 'running', 'succeeded', 'failed', 'cancelled'] as const) {
    expect(await r.engine.count(NS, Q, s), s).toBe([...m.jobs.values()].filter((j) => j.state === s).length);
  }
}

describe('model-based: the transition core against a model of the contract', () => {
  it('agrees with the model on every generated sequence (counterexamples: 0)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { size: '+1' }), async (cmds) => {
        const real = fresh();
        const model: Model = { jobs: new Map() };
        await fc.asyncModelRun(() => ({ model, real }), cmds);
        await checkCounts(model, real);
      }),
      { numRuns: Number(process.env.MODEL_RUNS ?? 300) },
    );
  }, 120_000);

  it('hands a job to a new holder only once the last one let it go or its lease ran out, and never moves a terminal row back, under any interleaving of concurrent calls', async () => {
    await fc.assert(
      fc.asyncProperty(fc.scheduler(), fc.array(fc.constantFrom('claim', 'claim', 'ack', 'nack', 'cancel', 'expire', 'heartbeat'), { minLength: 4, maxLength: 24 }), async (s, ops) => {
        const { engine, clock } = fresh();
        for (const i of IDS) await engine.submit(NS, Q, { id: i, envelope: bytes });
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
                const call = op === 'ack' ? engine.work.ack(NS, inv, { workerId: h.w, attempt: h.attempt }) : engine.work.nack(NS, inv, { workerId: h.w, attempt: h.attempt, error: 'x' });
                if ((await code(call)) === 'ok') mine.released = true;
              } else if (op === 'heartbeat') {
                const hb = await engine.work.heartbeat(NS, inv, { workerId: h.w, attempt: h.attempt }).catch(() => null);
                if (hb?.leaseUntil) mine.until = Math.max(mine.until, hb.leaseUntil);
              } else await code(engine.cancel(NS, inv));
            }
            for (const i of IDS) {
              const row = (await engine.get(NS, i))!;
              const was = terminal.get(i);
              if (was) expect(row.state, `${i} was ${was}`).toBe(was);
              if (row.state === 'succeeded' || row.state === 'failed' || row.state === 'cancelled') terminal.set(i, row.state);
            }
          }),
        );
        await s.waitAll();
        await Promise.all(tasks);
        // The real invariant: at every moment at most one worker holds an unexpired lease on a job.
        // So attempt k+1 may start only after attempt k let the job go, or after its lease ran out.
        for (const [key, next] of attempts) {
          const [id, k] = key.split('@') as [string, string];
          if (Number(k) < 2) continue;
          const prev = attempts.get(`${id}@${Number(k) - 1}`);
          if (!prev) continue;
          expect(prev.released || next.at >= prev.until, `${id}: attempt ${k} went to ${next.w} at ${next.at} while attempt ${Number(k) - 1} of ${prev.w} held a lease until ${prev.until}`).toBe(true);
        }
      }),
      { numRuns: Number(process.env.MODEL_RUNS ?? 200) },
    );
  }, 120_000);
});
