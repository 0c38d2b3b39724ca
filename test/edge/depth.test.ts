/**
 * Claims cost the same few rows at any queue depth (D1's own rows_read), for every claim kind,
 * and whatever number of delayed jobs waits behind the ones that came due.
 */
import { describe, expect, it } from 'vitest';
import { plane } from './setup/http.ts';
import { runInDurableObject } from 'cloudflare:test';
import { dbOf, queueStub } from './setup/objects.ts';
import { Engine } from '../../src/core/engine.ts';
import { D1Port } from '../../src/durable/d1-port.ts';
import { until } from '../support/wait.ts';

/** Inserts `n` queued rows at three priorities straight into D1 (a recursive CTE; the triggers keep the level counts). */
async function fill(ns: string, queue: string, n: number) {
  await (await dbOf(ns))
    .prepare(
      `WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < ?3)
     INSERT INTO invocations (ns, queue, id, priority, envelope, state, created_at, updated_at)
     SELECT ?1, ?2, 'd' || i, i % 3, X'00', 'queued', 1, 1 FROM k`,
    )
    .bind(ns, queue, n)
    .run();
}

async function rowsReadPerClaim(depth: number, kind: string) {
  const p = plane();
  await fill(p.ns, 'q', depth);
  const stub = queueStub(p.ns, 'q');
  await p.claim('q', 'w', { kind }); // warm: the object exists and has its identity
  const before = await stub.stats();
  for (let i = 0; i < 5; i++) expect((await p.claim('q', 'w', { kind })).body.claimed).toHaveLength(1);
  const after = await stub.stats();
  return (after.read - before.read) / 5;
}

describe('claim cost does not grow with depth', () => {
  for (const kind of ['fifo', 'filo', 'boltzmann']) {
    it(`${kind}: rows read per claim at depth 10 and at depth 100,000 are the same few`, async () => {
      const shallow = await rowsReadPerClaim(10, kind);
      const deep = await rowsReadPerClaim(100_000, kind);
      console.log(`rows read per ${kind} claim: depth 10 -> ${shallow}, depth 100000 -> ${deep}`);
      // A few: fifo 7, filo 8, boltzmann 13 (its levels, plus each moved row's check of the queue's sampled flag).
      expect(deep).toBeLessThanOrEqual(14);
      expect(deep).toBeLessThanOrEqual(shallow + 2);
    }, 60_000);
  }

  it('a claim reads the same few rows with 10 or 100,000 jobs delayed an hour, promoting the 10 that came due', async () => {
    const perClaim = async (delayed: number) => {
      const p = plane();
      const hour = Date.now() + 3_600_000;
      await (await dbOf(p.ns))
        .prepare(
          `WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < ?3)
         INSERT INTO invocations (ns, queue, id, envelope, state, run_at, created_at, updated_at)
         SELECT ?1, ?2, 'later' || i, X'00', 'delayed', ?4 + i, 1, 1 FROM k`,
        )
        .bind(p.ns, 'q', delayed, hour)
        .run();
      const stub = queueStub(p.ns, 'q');
      await stub.stats(); // the object starts, and learns when its first delayed job is due
      // Ten come due, written around the object: it is told to forget what it knew.
      await (await dbOf(p.ns))
        .prepare(
          `WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < 10)
         INSERT INTO invocations (ns, queue, id, envelope, state, run_at, created_at, updated_at)
         SELECT ?1, ?2, 'due' || i, X'00', 'delayed', 1000 + i, 1, 1 FROM k`,
        )
        .bind(p.ns, 'q')
        .run();
      await runInDurableObject(stub, (o) => o.forgetHints());
      const before = await stub.stats();
      for (let i = 0; i < 10; i++) expect((await p.claim('q', 'w')).body.claimed[0].id).toBe(`due${i}`);
      expect((await p.claim('q', 'w')).body.claimed).toEqual([]);
      const after = await stub.stats();
      return (after.read - before.read) / 11;
    };
    const shallow = await perClaim(10);
    const deep = await perClaim(100_000);
    console.log(`rows read per claim, 10 due: 10 delayed behind them -> ${shallow.toFixed(1)}, 100000 delayed -> ${deep.toFixed(1)}`);
    expect(deep).toBeLessThanOrEqual(shallow + 1);
    expect(deep).toBeLessThanOrEqual(14);
  }, 60_000);
});

describe('a claim on a queue its last claim drained', () => {
  it("parks without a D1 query, and the next submit's one batch hands it its job", async () => {
    const p = plane();
    const stub = queueStub(p.ns, 'q');
    const ids = (r: { body: { claimed: { id: string }[] } }) => r.body.claimed.map((c) => c.id);
    const parked = async (what: string) => until(async () => (await stub.stats()).waiters === 1, what);
    // A claim of 8 parks; the submit's batch hands it 1, short of 8: the queue is drained.
    const first = p.claim('q', 'w', { max: 8, wait_ms: 10_000 });
    await parked('the first claim to park');
    expect((await p.submit('q', 'a')).status).toBe(201);
    expect(ids(await first)).toEqual(['a']);
    // The worker's next claim finds the queue as the ride left it: it parks with no look.
    const before = await stub.stats();
    const second = p.claim('q', 'w', { max: 8, wait_ms: 10_000 });
    await parked('the second claim to park');
    expect((await stub.stats()).batches).toBe(before.batches);
    expect((await p.submit('q', 'b')).status).toBe(201);
    expect(ids(await second)).toEqual(['b']);
    expect((await stub.stats()).batches).toBe(before.batches + 1);
    // A claim that finds the queue changed since looks first: a job submitted with nobody parked.
    expect((await p.submit('q', 'c')).status).toBe(201);
    expect(ids(await p.claim('q', 'w', { max: 8, wait_ms: 10_000 }))).toEqual(['c']);
  });
});

describe('what a delay costs', () => {
  it('a delayed job writes 2 rows more than a queued one over its life (submit, promotion, claim, ack)', async () => {
    const life = async (delay: boolean) => {
      const p = plane();
      const stub = queueStub(p.ns, 'q');
      await p.submit('q', 'warm');
      expect((await p.claim('q', 'w')).body.claimed).toHaveLength(1); // the object exists and knows the queue
      const before = await stub.stats();
      for (let i = 0; i < 10; i++) {
        expect((await p.submit('q', `j${i}`, delay ? { delay_ms: 20 } : {})).status).toBe(201);
        // A claim that waits is woken when the job comes due: no sleep orders these steps.
        const c = (await p.claim('q', 'w', { wait_ms: 5_000 })).body.claimed;
        expect(c.map((x: { id: string }) => x.id)).toEqual([`j${i}`]);
        expect((await p.ack(`j${i}`, 'w')).status).toBe(200);
      }
      const after = await stub.stats();
      return { written: (after.written - before.written) / 10, read: (after.read - before.read) / 10 };
    };
    const queued = await life(false);
    const delayed = await life(true);
    console.log(
      `per job, submit to ack: queued wrote ${queued.written}, read ${queued.read}; delayed wrote ${delayed.written}, read ${delayed.read}`,
    );
    expect(delayed.written).toBeGreaterThan(queued.written); // the promotion is a real write, counted
    expect(delayed.written).toBeLessThanOrEqual(queued.written + 2); // 8 against 6 on D1's count
  }, 60_000);
});

describe('what a listing costs', () => {
  /** D1 rows read by one page of `state` after `pages` pages, on a queue `depth` deep. */
  async function rowsPerPage(depth: number, state: 'queued' | 'succeeded', pages: number) {
    const ns = plane().ns;
    if (state === 'queued') await fill(ns, 'q', depth);
    else {
      await (await dbOf(ns))
        .prepare(
          `WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < ?3)
         INSERT INTO invocations (ns, queue, id, envelope, state, created_at, updated_at, finished_at) SELECT ?1, ?2, 's' || i, X'00', 'succeeded', 1, 1, 1 FROM k`,
        )
        .bind(ns, 'q', depth)
        .run();
    }
    let read = 0;
    const engine = new Engine(new D1Port(await dbOf(ns)), {
      committer: {
        onBatch: (rs) => {
          for (const r of rs) read += r.rowsRead;
        },
      },
    });
    let cursor: string | null = null;
    for (let i = 0; i < pages; i++) cursor = (await engine.list(ns, 'q', state, 50, cursor)).cursor;
    const before = read;
    const page = await engine.list(ns, 'q', state, 50, cursor);
    expect(page.items).toHaveLength(50);
    return read - before;
  }

  for (const state of ['queued', 'succeeded'] as const) {
    it(`a page of ${state} jobs reads about a page of rows, at depth 1,000 or 100,000, first page or 50th`, async () => {
      const shallow = await rowsPerPage(1_000, state, 0);
      const deep = await rowsPerPage(100_000, state, 50);
      console.log(`rows read per page of 50 ${state}: depth 1000 first page -> ${shallow}, depth 100000 page 51 -> ${deep}`);
      expect(deep).toBeLessThanOrEqual(2 * 51 + 2);
      expect(deep).toBeLessThanOrEqual(shallow * 2 + 4);
    }, 120_000);
  }
});

describe('what an overview costs', () => {
  /** D1 rows read by one overview of a queue with `depth` queued jobs (a dashboard's redraw, a metrics scrape). */
  async function rowsPerOverview(depth: number) {
    const ns = plane().ns;
    await fill(ns, 'q', depth);
    let read = 0;
    const engine = new Engine(new D1Port(await dbOf(ns)), {
      committer: {
        onBatch: (rs) => {
          for (const r of rs) read += r.rowsRead;
        },
      },
    });
    const [o] = await engine.overview(ns, ['q']);
    expect(o!.counts.queued).toBe(depth);
    expect(o!.oldestQueuedMs).not.toBeNull();
    return read;
  }

  it('walks the backlog once: its count and its longest wait in one scan', async () => {
    const shallow = await rowsPerOverview(1_000);
    const deep = await rowsPerOverview(100_000);
    console.log(`rows read per overview: 1000 queued -> ${shallow}, 100000 queued -> ${deep}`);
    // One row read a queued job, as D1 counts: the count and the longest wait from one walk (two walks read 200,000).
    expect(deep).toBeLessThanOrEqual(100_000 + 1_000);
  }, 120_000);
});
