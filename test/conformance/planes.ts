/**
 * The planes the conformance suite runs against. Each factory answers a fresh plane in a fresh
 * namespace, plus how to dispose of it.
 *   memory   Dispatch(':memory:')
 *   file     Dispatch on one SQLite file shared by two processes: producer verbs run here,
 *            worker verbs (claim, ack, nack, heartbeat, append) in a second process
 *   http     HttpDispatch against a real `wrangler dev`
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inject } from 'vitest';
import { Dispatch, HttpDispatch, errorFor, type DispatchPlane } from '../../client/index.ts';

export interface PlaneHandle {
  plane: DispatchPlane;
  dispose(): Promise<void>;
}
export type PlaneFactory = () => Promise<PlaneHandle>;

let n = 0;
const freshNs = () => `c${process.pid}x${Date.now().toString(36)}${(n++).toString(36)}`;

export const memoryPlane: PlaneFactory = async () => {
  const plane = new Dispatch(':memory:', { namespace: freshNs() });
  return { plane, dispose: () => plane.close() };
};

export const httpPlane: PlaneFactory = async () => {
  const plane = new HttpDispatch(inject('planeUrl'), { token: inject('planeToken'), namespace: freshNs() });
  return { plane, dispose: () => plane.close() };
};

const WORKER_VERBS = new Set(['claim', 'claimMany', 'ack', 'nack', 'heartbeat', 'journalAppend']);

export const twoProcessPlane: PlaneFactory = async () => {
  const dir = mkdtempSync(join(tmpdir(), 'lakeshore-conf-'));
  const file = join(dir, 'dispatch.sqlite');
  const namespace = freshNs();
  const local = new Dispatch(file, { namespace });
  const child: ChildProcess = fork(join(import.meta.dirname, 'peer.ts'), [file, namespace], { serialization: 'advanced', stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>();
  let seq = 0;
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.on('message', (m: any) => {
      if (m.ready) return resolve();
      const p = pending.get(m.n);
      if (!p) return;
      pending.delete(m.n);
      if (m.ok) p.resolve(m.value);
      else p.reject(errorFor(m.code, m.message));
    });
  });
  const remote = (method: string) => (...args: unknown[]) =>
    new Promise((resolve, reject) => {
      const k = ++seq;
      pending.set(k, { resolve, reject });
      child.send({ n: k, method, args });
    });
  const plane = new Proxy(local, {
    get(target, prop, recv) {
      if (typeof prop === 'string' && WORKER_VERBS.has(prop)) return remote(prop);
      const v = Reflect.get(target, prop, recv);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  }) as DispatchPlane;
  return {
    plane,
    async dispose() {
      child.send({ close: true });
      await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
      await local.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
};
