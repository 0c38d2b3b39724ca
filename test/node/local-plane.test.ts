/** The local plane across processes: one SQLite file, several processes, crashes. */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Dispatch, HttpDispatch, planeFromEnv } from '../../client/index.ts';

const PEER = resolve(import.meta.dirname, '..', 'fixtures', 'local-peer.mjs');
const run = (args: string[]) => {
  const child = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', PEER, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  return { child, out: () => out, err: () => err, exited: new Promise<number | null>((r) => child.on('exit', (c) => r(c))) };
};

describe('local plane, several processes on one file', () => {
  it('hands each job to exactly one of three claiming processes', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'lakeshore-mp-')), 'd.sqlite');
    const d = new Dispatch(file, { namespace: 'mp' });
    const items = Array.from({ length: 300 }, (_, i) => ({ envelope: new Uint8Array([1]), opts: { id: `j${i}` } }));
    await d.submitMany('q', items);
    const peers = ['w1', 'w2', 'w3'].map((w) => run(['claim', file, 'mp', 'q', w]));
    for (let i = 0; i < 400 && !peers.every((p) => p.err().includes('ready')); i++) await new Promise((r) => setTimeout(r, 25));
    for (const p of peers) p.child.stdin!.write('go\n');
    await Promise.all(peers.map((p) => p.exited));
    const ids = peers.flatMap((p) => p.out().trim().split('\n').filter(Boolean));
    expect(ids).toHaveLength(300);
    expect(new Set(ids).size).toBe(300);
    expect(peers.filter((p) => p.out().length > 0).length).toBeGreaterThanOrEqual(2); // they really ran side by side
    expect(await d.count('q', 'succeeded')).toBe(300);
    await d.close();
  });

  it('keeps every acknowledged submit when the submitting process is killed with SIGKILL', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'lakeshore-crash-')), 'd.sqlite');
    const p = run(['submit', file, 'cr', 'q', '200']);
    for (let i = 0; i < 300 && !p.out().includes('submitted'); i++) await new Promise((r) => setTimeout(r, 50));
    expect(p.out()).toContain('submitted');
    p.child.kill('SIGKILL');
    await p.exited;
    const d = new Dispatch(file, { namespace: 'cr' });
    expect(await d.count('q')).toBe(200);
    await d.close();
  });
});

describe('defaultDispatch', () => {
  it('is HttpDispatch when LAKESHORE_URL is set, else the file in LAKESHORE_HOME', async () => {
    const http = planeFromEnv({ LAKESHORE_URL: 'http://127.0.0.1:1', LAKESHORE_TOKEN: 't', LAKESHORE_NAMESPACE: 'team' });
    expect(http).toBeInstanceOf(HttpDispatch);
    expect(http.namespace).toBe('team');
    const home = mkdtempSync(join(tmpdir(), 'lakeshore-home-'));
    const local = planeFromEnv({ LAKESHORE_HOME: home });
    expect(local).toBeInstanceOf(Dispatch);
    expect((local as Dispatch).path).toBe(join(home, 'dispatch.sqlite'));
    expect(local.namespace).toBe('default');
    await local.close();
  });
});
