/** Claims cost the same few rows at any queue depth (D1's own rows_read), for every claim kind. */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { plane } from './setup/http.ts';
import { queueStub } from './setup/objects.ts';

/** Inserts `n` queued rows at three priorities straight into D1 (a recursive CTE; the triggers keep the level counts). */
async function fill(ns: string, queue: string, n: number) {
  await env.DB.prepare(
    `WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < ?3)
     INSERT INTO invocations (ns, queue, id, priority, envelope, state, created_at, updated_at)
     SELECT ?1, ?2, 'd' || i, i % 3, X'00', 'queued', 1, 1 FROM k`,
  ).bind(ns, queue, n).run();
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
});
