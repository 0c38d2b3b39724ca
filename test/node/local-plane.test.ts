/** The local plane across processes: one SQLite file, several processes, crashes. */
import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../support/tmp.ts';
import { Dispatch, HttpDispatch, planeFromEnv } from '../../client/local/index.ts';
import { streamEnvelope } from '../fixtures/stream-envelope.mjs';
import { until } from '../support/wait.ts';
import { followLives } from '../support/feed-lives.ts';
import { checkANewerClaimOutlivesAnOlderAttemptsAnswer } from '../support/held-claims.ts';

const PEER = resolve(import.meta.dirname, '..', 'fixtures', 'local-peer.mjs');
const run = (args: string[]) => {
  const child = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', PEER, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  return { child, out: () => out, err: () => err, exited: new Promise<number | null>((r) => child.on('exit', (c) => r(c))) };
};

const lines = (s: string) => s.split('\n').slice(0, -1); // only lines that ended: a kill can cut the last
const integrity = (file: string) => {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    return (db.prepare('PRAGMA integrity_check').get() as { integrity_check: string }).integrity_check;
  } finally {
    db.close();
  }
};

describe('local plane, several processes on one file', () => {
  it('hands each job to exactly one of three claiming processes', async () => {
    const file = join(tempDir('lakeshore-mp-'), 'd.sqlite');
    const d = new Dispatch(file, { namespace: 'mp' });
    const items = Array.from({ length: 300 }, (_, i) => ({ envelope: new Uint8Array([1]), opts: { id: `j${i}` } }));
    await d.submitMany('q', items);
    const peers = ['w1', 'w2', 'w3'].map((w) => run(['claim', file, 'mp', 'q', w]));
    await until(() => peers.every((p) => p.err().includes('ready')), 'three claiming processes ready');
    for (const p of peers) p.child.stdin!.write('go\n');
    await Promise.all(peers.map((p) => p.exited));
    const ids = peers.flatMap((p) => p.out().trim().split('\n').filter(Boolean));
    expect(ids).toHaveLength(300);
    expect(new Set(ids).size).toBe(300);
    expect(peers.filter((p) => p.out().length > 0).length).toBeGreaterThanOrEqual(2); // they really ran side by side
    expect(await d.count('q', 'succeeded')).toBe(300);
    await d.close();
  });

  it('tells each job’s life in order in the feed, when another process acts on a job the moment it commits', async () => {
    const file = join(tempDir('lakeshore-order-'), 'd.sqlite');
    const d = new Dispatch(file, { namespace: 'fo' });
    const feed = await followLives(d);
    // Two processes claim without waiting, so one of them takes each job as soon as its submit
    // commits, often before the submitting process wrote its record. The submitter exits the
    // moment its last submit returns, without closing its plane: its last record is not lost.
    const n = 400;
    const workers = ['w1', 'w2'].map((w) => run(['work', file, 'fo', 'order', w, String(n)]));
    const submitter = run(['submit', file, 'fo', 'order', String(n)]);
    expect(await submitter.exited, submitter.err()).toBe(0);
    for (const w of workers) expect(await w.exited, w.err()).toBe(0);
    await feed.expectInOrder('order', n);
    await feed.stop();
    await d.close();
  });

  it('keeps every acknowledged submit, whole, when a process submitting without pause is SIGKILLed at random moments', async () => {
    const dir = tempDir('lakeshore-crash-');
    const file = join(dir, 'd.sqlite');
    const acked = new Set<string>();
    // Five kills, each at another point of the stream: after 1 to 400 acknowledged submits.
    const points = [1, 37, 150, 400, 9].map((n) => n + Math.floor(Math.random() * 20));
    for (const [round, point] of points.entries()) {
      const p = run(['stream', file, 'cr', 'q', `r${round}`]);
      await until(() => lines(p.out()).length >= point || p.child.exitCode !== null, `${point} acknowledged submits`).catch((e) => {
        throw new Error(
          `${e.message}: round ${round} printed ${lines(p.out()).length}; exit ${p.child.exitCode}; stderr ${p.err().slice(0, 500)}`,
        );
      });
      p.child.kill('SIGKILL');
      await p.exited;
      expect(p.err()).toBe('');
      for (const id of lines(p.out())) acked.add(id);
      const d = new Dispatch(file, { namespace: 'cr' });
      try {
        expect(integrity(file)).toBe('ok');
        const stored = await d.count('q');
        // Every acknowledged id is there, and every stored row is whole: its envelope and key as submitted.
        for (const id of acked) {
          const row = await d.get(id);
          expect(row, `acknowledged ${id}`).not.toBeNull();
          expect(new TextDecoder().decode(row!.envelope)).toBe(streamEnvelope(id));
          expect(row!.key).toBe(`key-${id}`);
        }
        expect(stored).toBeGreaterThanOrEqual(acked.size);
        expect(await d.count('q', 'running')).toBe(0);
      } finally {
        await d.close();
      }
    }
    expect(acked.size).toBeGreaterThan(500);
  }, 60_000);
});

describe('defaultDispatch', () => {
  it('is HttpDispatch when LAKESHORE_URL is set, else the file in LAKESHORE_HOME', async () => {
    const http = planeFromEnv({ LAKESHORE_URL: 'http://127.0.0.1:1', LAKESHORE_TOKEN: 't', LAKESHORE_NAMESPACE: 'team' });
    expect(http).toBeInstanceOf(HttpDispatch);
    expect(http.namespace).toBe('team');
    const home = tempDir('lakeshore-home-');
    const local = planeFromEnv({ LAKESHORE_HOME: home });
    expect(local).toBeInstanceOf(Dispatch);
    expect((local as Dispatch).path).toBe(join(home, 'dispatch.sqlite'));
    expect(local.namespace).toBe('default');
    await local.close();
  });
});

describe('local plane, one client', () => {
  it('keeps a job’s newer claim when its older attempt’s nack returns after it', async () => {
    const d = new Dispatch(join(tempDir('lakeshore-held-'), 'd.sqlite'), { namespace: 'held' });
    // The engine's nack, then the claim, then the nack's answer read by the client.
    const work = (d as unknown as { engine: { work: { nack: (...a: unknown[]) => Promise<unknown> } } }).engine.work;
    const nack = work.nack.bind(work);
    await checkANewerClaimOutlivesAnOlderAttemptsAnswer(d, (run) => {
      work.nack = async (...a) => {
        const out = await nack(...a);
        work.nack = nack;
        await run();
        return out;
      };
    });
    await d.close();
  });
});
