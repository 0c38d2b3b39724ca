/**
 * The planes the conformance suite runs against. Each factory answers a fresh plane in a fresh
 * namespace, how to dispose of it, and two probes the suite orders its steps by:
 *   parked()     how many calls wait on the plane now (a claim parked before the submit that wakes it)
 *   elapse(ms)   lets ms of the plane's time pass: an injected clock moves at once where the plane
 *                has one (the local planes); over HTTP real time passes, waited for with a bound
 *
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
import { Dispatch, HttpDispatch, errorFor, startPushing, type DispatchPlane, type FeedItem } from '../../client/local/index.ts';
import { until } from '../support/wait.ts';
import { newToken, startPlane } from '../../scripts/plane.mjs';

export interface PlaneHandle {
  plane: DispatchPlane;
  dispose(): Promise<void>;
  /** Calls parked right now: on the plane (local), or on `queue`'s object (HTTP). */
  parked(queue: string): Promise<number>;
  /** Lets `ms` of the plane's time pass. */
  elapse(ms: number): Promise<void>;
  /** The plane's clock. */
  now(): number;
  /**
   * A lease (or delay, or TTL) that runs out in the test's time: elapse moves the clock past it at
   * once where it can, and waits it out over HTTP (1.5 s: long enough that load cannot run past it
   * between two quick calls of a test).
   */
  shortLeaseMs: number;
  /** Whether elapse moves the plane's clock (else real time passes). */
  movableClock: boolean;
  /**
   * The plane as this process runs it: on the two-process plane, the verbs all run here (a local
   * plane's feed tells its own process's transitions); elsewhere, the plane itself.
   */
  inProcess?: DispatchPlane;
  /**
   * Starts pushing from a local plane, as `lakeshore push` does (client/local/push.ts); left out
   * where the plane pushes by itself (the edge plane's queue objects).
   */
  pushFrom?: () => { stop(): Promise<void> };
  /** `pushFrom`'s pusher runs in another process than the one answering the plane's verbs (the Python plane): its overview shows no pusher's figures. */
  pushesFromAnotherProcess?: boolean;
}
export type PlaneFactory = () => Promise<PlaneHandle>;
/** A plane of its own whose database has this storage budget (the storage part of the suite). */
export type StoragePlaneFactory = (limitBytes: number, highWaterPercent: number) => Promise<PlaneHandle>;

let n = 0;
const freshNs = () => `c${process.pid}x${Date.now().toString(36)}${(n++).toString(36)}`;

/** A clock the test moves: the real one plus an offset. */
function movableClock() {
  let offset = 0;
  return { now: () => Date.now() + offset, advance: (ms: number) => void (offset += ms) };
}

export const memoryPlane: PlaneFactory = () => memoryPlaneWith();
export const memoryStoragePlane: StoragePlaneFactory = (limitBytes, highWaterPercent) => memoryPlaneWith({ limitBytes, highWaterPercent });

async function memoryPlaneWith(storage?: { limitBytes: number; highWaterPercent: number }): Promise<PlaneHandle> {
  const clock = movableClock();
  const plane = new Dispatch(':memory:', { namespace: freshNs(), now: clock.now, storage });
  return {
    plane,
    dispose: () => plane.close(),
    parked: async () => plane.parked,
    elapse: async (ms) => clock.advance(ms),
    now: clock.now,
    shortLeaseMs: 1_000,
    movableClock: true,
    pushFrom: () => startPushing(plane),
  };
}

/** A plane of its own (scripts/serve.mjs, one shard) whose D1 has this budget (STORAGE_LIMIT_BYTES, STORAGE_HIGH_WATER_PERCENT). */
export const httpStoragePlane: StoragePlaneFactory = async (limitBytes, highWaterPercent) => {
  const dir = mkdtempSync(join(tmpdir(), 'lakeshore-storage-'));
  const token = newToken('lsk_storage_');
  const served = await startPlane({
    node: process.execPath,
    env: process.env,
    persistTo: dir,
    vars: { LAKESHORE_TOKEN: token, STORAGE_LIMIT_BYTES: String(limitBytes), STORAGE_HIGH_WATER_PERCENT: String(highWaterPercent) },
  });
  const plane = new HttpDispatch(served.url, { token, namespace: freshNs() });
  return {
    plane,
    async dispose() {
      await plane.close();
      await served.stop();
      rmSync(dir, { recursive: true, force: true });
    },
    parked: async () => 0,
    ...realTime,
  };
};

export const httpPlane: PlaneFactory = async () => {
  const url = inject('planeUrl');
  const token = inject('planeToken');
  const namespace = freshNs();
  const plane = new HttpDispatch(url, { token, namespace });
  return {
    plane,
    dispose: () => plane.close(),
    // Parked claims, result waits and journal reads of the queue's object.
    parked: async (queue) => {
      const r = await fetch(`${url}/v1/ns/${namespace}/queues/${queue}/stats`, { headers: { authorization: `Bearer ${token}` } });
      return ((await r.json()) as { waiters: number }).waiters;
    },
    ...realTime,
  };
};

/**
 * The clock of a plane in another process with no clock to move (HTTP, the Python bridge): real
 * time passes, waited for with a bound; a short lease long enough that a loaded machine cannot run
 * past it between two quick calls.
 */
export const realTime = {
  elapse: async (ms: number) => {
    const end = Date.now() + ms;
    await until(() => Date.now() >= end, `${ms} ms of real time`, ms + 5_000);
  },
  now: Date.now,
  shortLeaseMs: 1_500,
  movableClock: false,
} satisfies Pick<PlaneHandle, 'elapse' | 'now' | 'shortLeaseMs' | 'movableClock'>;

/**
 * Run in the second process. The overview too: its `recent` counts the transitions of the process
 * that ran them (the local plane keeps it in memory, as its metrics' counters), and the worker
 * verbs run there.
 */
const WORKER_VERBS = new Set(['claim', 'claimMany', 'ack', 'nack', 'heartbeat', 'journalAppend', 'workers', 'workerStopped', 'overview']);

export const twoProcessPlane: PlaneFactory = () => twoProcessPlaneWith();
export const twoProcessStoragePlane: StoragePlaneFactory = (limitBytes, highWaterPercent) =>
  twoProcessPlaneWith({ limitBytes, highWaterPercent });

async function twoProcessPlaneWith(storage?: { limitBytes: number; highWaterPercent: number }): Promise<PlaneHandle> {
  const dir = mkdtempSync(join(tmpdir(), 'lakeshore-conf-'));
  const file = join(dir, 'dispatch.sqlite');
  const namespace = freshNs();
  const clock = movableClock();
  const local = new Dispatch(file, { namespace, now: clock.now, storage });
  const child: ChildProcess = fork(join(import.meta.dirname, 'peer.ts'), [file, namespace], {
    serialization: 'advanced',
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
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
  const ask = (msg: Record<string, unknown>) =>
    new Promise((resolve, reject) => {
      const k = ++seq;
      pending.set(k, { resolve, reject });
      child.send({ n: k, ...msg });
    });
  const plane = new Proxy(local, {
    get(target, prop, recv) {
      if (typeof prop === 'string' && WORKER_VERBS.has(prop)) return (...args: unknown[]) => ask({ method: prop, args });
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
    parked: async () => local.parked + ((await ask({ parked: true })) as number),
    elapse: async (ms) => {
      clock.advance(ms);
      await ask({ advance: ms });
    },
    now: clock.now,
    shortLeaseMs: 1_000,
    movableClock: true,
    inProcess: local,
    pushFrom: () => startPushing(local),
    // The overview is answered by the other process.
    pushesFromAnotherProcess: true,
  };
}

/**
 * Follows `queue`'s feed (the namespace's with null) and answers its iterator once attached: once
 * a probe job's record has come through, submitted probe by probe (`probe<i>`, at most 50, 200 ms
 * each), so no record of what the test does next can be missed.
 */
export async function attachedFeed(d: DispatchPlane, queue: string, signal: AbortSignal): Promise<AsyncIterator<FeedItem>> {
  const it = d.events(queue, { signal })[Symbol.asyncIterator]();
  const first = it.next();
  for (let i = 0; i < 50; i++) {
    await d.submit(queue, new TextEncoder().encode('x'), { id: `probe${i}` });
    if (await Promise.race([first.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 200))])) return it;
  }
  throw new Error(`the feed of ${queue} did not attach`);
}
