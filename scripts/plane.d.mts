// Types of scripts/plane.mjs (plain JS so `npm start` runs before any TypeScript tooling exists).
import type { ChildProcess } from 'node:child_process';

export interface Plane {
  url: string;
  pid: number | undefined;
  child: ChildProcess;
  stop(): Promise<void>;
  /** SIGKILLs the plane's process group (a crash) and resolves once its port is free to start on again. */
  kill(): Promise<void>;
  /** The last 20 kB the server printed (with stdio 'pipe'). */
  output(): string;
}

export interface StartOptions {
  node: string;
  env: NodeJS.ProcessEnv;
  port?: number;
  persistTo: string;
  vars?: Record<string, string>;
  log?: string;
  stdio?: 'pipe' | 'inherit' | 'ignore';
  server?: 'miniflare' | 'wrangler';
  migrate?: boolean;
  /** No `ready` line from the server. */
  quiet?: boolean;
  /** D1 databases: DB, DB_1, ... (default 1). */
  shards?: number;
}

export function quietEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv;
export function newToken(prefix?: string): string;
export function devToken(): string;
export function freePort(): Promise<number>;
/** What answers on a loopback port: a lakeshore plane, another program, or nothing. */
export function portHolder(port: number): Promise<'lakeshore' | 'other' | null>;
/** Throws (code ERR_PORT_IN_USE) with a message saying what holds the port. */
export function ensurePortFree(port: number): Promise<void>;
export function applyMigrations(opts: { node: string; env: NodeJS.ProcessEnv; persistTo: string; shards?: number }): Promise<void>;
export function shardBindings(shards?: number): string[];
export function configFor(persistTo: string, shards?: number): string;
export function startPlane(opts: StartOptions): Promise<Plane>;
export function stopTree(child: ChildProcess): Promise<void>;
export function killTree(child: ChildProcess, port: number): Promise<void>;
