/**
 * The transition table in src/core/states.ts against the statements themselves: for every verb
 * and every state, a row in that state is moved by the verb's guarded statement exactly when the
 * table lists the state as a from-state, and then it is in the table's to-state. A guard that
 * admits one state too many, or one too few, fails here.
 */
import { DatabaseSync } from 'node:sqlite';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../client/local/migrate.ts';
import { SqlitePort } from '../../client/local/sqlite-port.ts';
import { Engine } from '../../src/core/engine.ts';
import { STATES, TRANSITIONS, type State } from '../../src/core/states.ts';

const NS = 'tt';
const Q = 'q';
const NOW = 1_000_000;

/**
 * A fresh engine with one row `a` forced into `state`, held by worker w at attempt `attempt`;
 * a delayed row is due at `runAt`; `expiresAt` gives it a TTL; `backoff` gives its queue one.
 */
async function rowIn(
  state: State,
  { attempt = 1, leaseUntil = NOW + 60_000, runAt = NOW + 60_000, expiresAt = null as number | null, backoff = false } = {},
) {
  const db = new DatabaseSync(':memory:');
  migrate(db);
  const engine = new Engine(new SqlitePort(db), { now: () => NOW, limits: { defaultMaxAttempts: 3 } });
  if (backoff) await engine.admin.configure(NS, Q, { retryBackoff: { initialMs: 1_000 } });
  await engine.submit(NS, Q, { id: 'a', envelope: new Uint8Array() });
  db.prepare(`INSERT INTO workers (ns, n, name) VALUES (?, 1, 'w')`).run(NS);
  db.prepare(`UPDATE invocations SET state = ?, worker = 1, attempt = ?, lease_until = ?, run_at = ?, expires_at = ? WHERE id = 'a'`).run(
    state,
    attempt,
    state === 'running' ? leaseUntil : null,
    state === 'delayed' ? runAt : null,
    expiresAt,
  );
  const stateOf = () => (db.prepare(`SELECT state FROM invocations WHERE id = 'a'`).get() as { state: State }).state;
  return { engine, stateOf };
}

const swallow = (p: Promise<unknown>) => p.catch(() => undefined);

/** Each verb of the table, run against the row as its rightful caller would. */
type Verb = Exclude<keyof typeof TRANSITIONS, 'submit' | 'submitDelayed'>;
const run: Record<Verb, (s: State) => Promise<State>> = {
  promote: async (s) => {
    const { engine, stateOf } = await rowIn(s, { runAt: NOW - 1 });
    await engine.work.sweep(NS, Q);
    return stateOf();
  },
  nackBackoff: async (s) => {
    const { engine, stateOf } = await rowIn(s, { backoff: true });
    await swallow(engine.work.nack(NS, 'a', { workerId: 'w', attempt: 1, error: 'x', retry: true }));
    return stateOf();
  },
  expireBackoff: async (s) => {
    const { engine, stateOf } = await rowIn(s, { attempt: 1, leaseUntil: NOW - 1, backoff: true });
    await engine.work.sweep(NS, Q);
    return stateOf();
  },
  ttl: async (s) => {
    const { engine, stateOf } = await rowIn(s, { expiresAt: NOW - 1 });
    await engine.work.sweep(NS, Q);
    return stateOf();
  },
  retry: async (s) => {
    const { engine, stateOf } = await rowIn(s);
    await swallow(engine.retry(NS, 'a'));
    return stateOf();
  },
  claim: async (s) => {
    const { engine, stateOf } = await rowIn(s);
    await engine.work.claim(NS, Q, { workerId: 'w2' });
    return stateOf();
  },
  ack: async (s) => {
    const { engine, stateOf } = await rowIn(s);
    await swallow(engine.work.ack(NS, 'a', { workerId: 'w', attempt: 1 }));
    return stateOf();
  },
  nackRetry: async (s) => {
    const { engine, stateOf } = await rowIn(s);
    await swallow(engine.work.nack(NS, 'a', { workerId: 'w', attempt: 1, error: 'x', retry: true }));
    return stateOf();
  },
  nackFail: async (s) => {
    const { engine, stateOf } = await rowIn(s);
    await swallow(engine.work.nack(NS, 'a', { workerId: 'w', attempt: 1, error: 'x', retry: false }));
    return stateOf();
  },
  expireRetry: async (s) => {
    const { engine, stateOf } = await rowIn(s, { attempt: 1, leaseUntil: NOW - 1 });
    await engine.work.sweep(NS, Q);
    return stateOf();
  },
  expireFail: async (s) => {
    const { engine, stateOf } = await rowIn(s, { attempt: 3, leaseUntil: NOW - 1 });
    await engine.work.sweep(NS, Q);
    return stateOf();
  },
  cancel: async (s) => {
    const { engine, stateOf } = await rowIn(s);
    await swallow(engine.cancel(NS, 'a'));
    return stateOf();
  },
  release: async (s) => {
    const { engine, stateOf } = await rowIn(s);
    await engine.work.release(NS, Q, 'w', [{ id: 'a', attempt: 1 }]);
    return stateOf();
  },
};

describe('the transition table is what the guards admit', () => {
  for (const [verb, t] of Object.entries(TRANSITIONS)) {
    if (t.from.length === 0) continue; // submits create rows
    it(`${verb}: moves ${t.from.join(', ')} to ${t.to}, and no other state`, async () => {
      for (const s of STATES) {
        const after = await run[verb as keyof typeof run](s);
        const from = t.from as readonly State[];
        expect(after, `${verb} on a ${s} row`).toBe(from.includes(s) ? t.to : s);
      }
    });
  }

  it('release puts back only its own claim, and does not charge the attempt', async () => {
    const { engine, stateOf } = await rowIn('running', { attempt: 2 }); // its second attempt of 3
    expect(await engine.work.release(NS, Q, 'w', [{ id: 'a', attempt: 1 }])).toEqual([]); // a stale attempt
    expect(await engine.work.release(NS, Q, 'other', [{ id: 'a', attempt: 2 }])).toEqual([]); // another worker
    expect(stateOf()).toBe('running');
    expect(await engine.work.release(NS, Q, 'w', [{ id: 'a', attempt: 2 }])).toEqual(['a']);
    // Not charged: the next claim is attempt 3 by number, but only the second against the budget,
    // so a failure of it still leaves one attempt.
    const c = await engine.work.claim(NS, Q, { workerId: 'w2' });
    expect(c?.attempt).toBe(3);
    expect(await engine.work.nack(NS, 'a', { workerId: 'w2', attempt: 3, error: 'x' })).toMatchObject({ state: 'queued' });
  });

  it('covers every verb of the table', () => {
    expect(
      Object.keys(TRANSITIONS)
        .filter((v) => !v.startsWith('submit'))
        .sort(),
    ).toEqual(Object.keys(run).sort());
  });
});
