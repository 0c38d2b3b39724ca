/**
 * How the reads that answer stored values keep large ones out of their first read (the bounds
 * themselves are the conformance suite's, test/conformance/large.ts): a journal page, a wait on
 * many jobs read every row they read before, no more, and the bytes of a large value only when
 * it fits the answer. A large frame past a page's first few comes back without its body, and the
 * page ends before it; a large result is read after, by rowid, when it fits. A listing and get
 * many cut a large error in SQLite.
 * Seen in the statements the local plane ran and what they answered.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SqlitePort } from '../../client/local/sqlite-port.ts';
import { Dispatch, FrameKind } from '../../client/local/index.ts';
import type { Stmt, StmtResult } from '../../src/core/port.ts';

const KIB = 1 << 10;
const big = (n: number, c: number) => new Uint8Array(n).fill(c);

describe('large values stay out of the first read', () => {
  const ran: { sql: string; rows: Record<string, unknown>[] }[] = [];
  const original = SqlitePort.prototype.batchSync;
  let d: Dispatch;
  beforeEach(() => {
    SqlitePort.prototype.batchSync = function (this: SqlitePort, stmts: Stmt[]): StmtResult[] {
      const out = original.call(this, stmts);
      for (const [i, s] of stmts.entries()) ran.push({ sql: s.sql, rows: out[i]!.rows });
      return out;
    };
    d = new Dispatch(':memory:', { namespace: 'large' });
  });
  afterEach(async () => {
    SqlitePort.prototype.batchSync = original;
    ran.length = 0;
    await d.close();
  });
  const reads = (part: string) => ran.filter((r) => r.sql.replace(/\s+/g, ' ').includes(part));

  it('a journal page reads the bodies of its first frames, and of small ones; a large one past them ends the page unread', async () => {
    await d.submit('q', big(1, 1), { id: 'j' });
    const c = (await d.claim('q', 'w'))!;
    for (let s = 0; s < 10; s++)
      await d.journalAppend(
        'j',
        s,
        { kind: FrameKind.VALUE, seq: s, body: big(s === 6 ? 10 : 200 * KIB, s), meta: null },
        { workerId: 'w', attempt: c.attempt },
      );
    ran.length = 0;
    const page = await d.journalPage('j');
    expect(page.frames.map((f) => f.seq)).toEqual([0, 1, 2, 3]);
    const [frames] = reads('FROM frames WHERE inv');
    expect(frames!.rows.map((r) => (r.body === null ? 'unread' : (r.body as Uint8Array).length))).toEqual([
      200 * KIB,
      200 * KIB,
      200 * KIB,
      200 * KIB,
      'unread',
      'unread',
      10,
      'unread',
      'unread',
      'unread',
    ]);
  });

  it('a wait on many jobs reads large results after, by rowid, those that fit', async () => {
    for (let i = 0; i < 6; i++) await d.submit('q', big(1, 1), { id: `r${i}` });
    for (let i = 0; i < 6; i++) {
      const c = (await d.claim('q', 'w'))!;
      await d.ack(c.id, 'w', { attempt: c.attempt, result: big(i % 2 ? 100 * KIB : 10, i) });
    }
    ran.length = 0;
    const got = await d.results('q', ['r0', 'r1', 'r2', 'r3', 'r4', 'r5']);
    expect(got.map((e) => [e.id, e.ok && e.result!.length]).sort()).toEqual([
      ['r0', 10],
      ['r1', 100 * KIB],
      ['r2', 10],
      ['r3', 100 * KIB],
      ['r4', 10],
      ['r5', 100 * KIB],
    ]);
    const [first] = reads('AS j LEFT JOIN invocations AS i ON i.ns');
    expect(first!.rows.map((r) => [r.id, r.result === null ? 'unread' : (r.result as Uint8Array).length]).sort()).toEqual([
      ['r0', 10],
      ['r1', 'unread'],
      ['r2', 10],
      ['r3', 'unread'],
      ['r4', 10],
      ['r5', 'unread'],
    ]);
    expect(reads('SELECT rid, state, result, error FROM invocations WHERE rid IN')).toHaveLength(1);
  });

  it('a listing and get many cut a large error in SQLite: its bytes never leave it', async () => {
    for (let i = 0; i < 4; i++) await d.submit('q', big(1, 1), { id: `f${i}` });
    for (let i = 0; i < 4; i++) {
      const c = (await d.claim('q', 'w'))!;
      await d.nack(c.id, 'w', { attempt: c.attempt, error: `${c.id} `.padEnd(i % 2 ? 100 * KIB : 10, 'e'), retry: false });
    }
    ran.length = 0;
    await d.list('q', { state: 'failed' });
    await d.getMany(['f0', 'f1', 'f2', 'f3']);
    const sizes = (part: string) => reads(part)[0]!.rows.map((r) => [r.id, String(r.error).length < 1000 ? 'small' : 'large']);
    // The listing's read, newest first: the retention pass a finished job starts reads the same index.
    expect(sizes('ORDER BY rid DESC LIMIT')).toEqual([
      ['f3', 'small'],
      ['f2', 'small'],
      ['f1', 'small'],
      ['f0', 'small'],
    ]);
    expect(sizes('AS j LEFT JOIN invocations ON invocations.ns')).toEqual([
      ['f0', 'small'],
      ['f1', 'small'],
      ['f2', 'small'],
      ['f3', 'small'],
    ]);
  });
});
