/**
 * Namespace-scoped tokens and what each role may do. A token is `lsk_<id>_<secret>`: the id is
 * its visible prefix and primary key, the secret 256 random bits. Only the SHA-256 of the whole
 * token is stored; digests of equal length are compared in constant time.
 */
import { toHex } from './bytes.ts';
import { badRequest, LakeshoreError } from './errors.ts';
import type { TokenLimits } from './wire-types.ts';

export type { TokenLimits };

export const ROLES = Object.freeze(['producer', 'worker', 'admin'] as const);
export type Role = (typeof ROLES)[number];

/** The verbs of the HTTP contract, and the roles allowed each. Admin may do everything. */
export const PERMISSIONS = Object.freeze({
  submit: ['producer'],
  get: ['producer'],
  /** Workers too: a worker waits on the results of the jobs it runs, to hear a cancel as it happens (client/worker/cancel-watch.ts). */
  result: ['producer', 'worker'],
  cancel: ['producer'],
  retry: ['producer'],
  redrive: ['producer'],
  /** Deleting one finished job: as cancel and retry. Purging a queue's finished jobs: admin only. */
  delete: ['producer'],
  purge: [],
  count: ['producer'],
  read: ['producer'],
  trim: ['producer'],
  queues: ['producer', 'worker'],
  claim: ['worker'],
  heartbeat: ['worker'],
  ack: ['worker'],
  nack: ['worker'],
  append: ['worker'],
  configure: [],
  pause: [],
  schedules: [],
  tokens: [],
  stats: ['producer', 'worker'],
  stream: ['producer'],
  list: ['producer'],
  events: ['producer', 'worker'],
  metrics: ['producer', 'worker'],
  workers: ['producer', 'worker'],
  /** Code archives (push_code): producers push them and ask whether one is there; workers fetch them. */
  codePut: ['producer'],
  codeHead: ['producer', 'worker'],
  codeGet: ['worker'],
  /** Moving a namespace to another shard: the operator's, the root token only (ROOT_VERBS). */
  move: [],
  /** The deployment's shards, their storage and the namespaces on each: the operator's, the root token only. */
  shards: [],
} satisfies Record<string, Role[]>);
export type Verb = keyof typeof PERMISSIONS;

/** Each verb as a refusal says it: "a producer token may not manage tokens". */
const SAID: Record<Verb, string> = {
  submit: 'submit',
  get: 'read jobs',
  result: 'wait for results',
  cancel: 'cancel',
  retry: 'retry',
  redrive: 'redrive',
  delete: 'delete jobs',
  purge: 'purge a queue',
  count: 'count jobs',
  read: 'read journals',
  trim: 'trim journals',
  queues: 'read queues',
  claim: 'claim',
  heartbeat: 'heartbeat',
  ack: 'ack',
  nack: 'nack',
  append: 'append to journals',
  configure: "change a queue's settings",
  pause: 'pause or resume a queue',
  schedules: 'read or set schedules',
  tokens: 'manage tokens',
  stats: 'read stats',
  stream: 'make stream tokens',
  list: 'list jobs',
  events: 'read the lifecycle feed',
  metrics: 'read metrics',
  workers: 'list workers',
  codePut: 'push code',
  codeHead: 'look up pushed code',
  codeGet: 'fetch pushed code',
  move: 'move a namespace',
  shards: "look at the deployment's shards",
};

/** Who may, said after a refusal: "(an admin token may)", "(a producer or admin token may)". */
function whoMay(verb: Verb): string {
  const roles = [...PERMISSIONS[verb], 'admin'];
  return `(${/^[aeiou]/.test(roles[0]!) ? 'an' : 'a'} ${roles.join(' or ')} token may)`;
}

/** Verbs of the deployment's operator: the root token only, not even a namespace's admin. */
const ROOT_VERBS: ReadonlySet<Verb> = new Set<Verb>(['move', 'shards']);

/** A route of the deployment, of no namespace (its shards): the root token only. */
export function authorizeRoot(p: Principal, verb: Verb): void {
  if (p.kind !== 'root') throw new LakeshoreError('forbidden', `only the deployment's root token may ${SAID[verb]}`);
}

/** Verbs limited to a worker token's pools when it names some. */
const POOL_VERBS: ReadonlySet<Verb> = new Set<Verb>(['claim', 'heartbeat', 'ack', 'nack', 'append', 'result']);

/** What a stream token (src/worker/stream-token.ts) may do, on its one invocation only. */
export const STREAM_VERBS: ReadonlySet<Verb> = new Set<Verb>(['get', 'result', 'read']);

/**
 * What a delivery token (delivery-token.ts) may do, on its one invocation and attempt: what the
 * worker holding that attempt may, and read it.
 */
export const DELIVERY_VERBS: ReadonlySet<Verb> = new Set<Verb>(['get', 'result', 'read', 'ack', 'nack', 'heartbeat', 'append']);

/** Who is calling: the deployment's root token, a namespace-scoped token, a stream token for one invocation, or a delivery token for one attempt. */
export type Principal =
  | { kind: 'root' }
  | { kind: 'token'; id: string; ns: string; role: Role; pools: string[] | null; limits: TokenLimits | null }
  | { kind: 'stream'; jti: string; ns: string; queue: string; id: string; streams: number }
  | { kind: 'delivery'; ns: string; queue: string; id: string; attempt: number; workerId: string };

export function authorize(p: Principal, ns: string, verb: Verb, queue?: string): void {
  if (p.kind === 'root') return;
  if (p.kind === 'stream') {
    if (!STREAM_VERBS.has(verb))
      throw new LakeshoreError('forbidden', `a stream token only reads its invocation's row, result and journal; it may not ${SAID[verb]}`);
    // Another namespace, queue or invocation: as if there were nothing there (nothing leaks).
    if (p.ns !== ns || (queue !== undefined && queue !== p.queue))
      throw new LakeshoreError('not_found', 'nothing here for this stream token');
    return;
  }
  if (p.kind === 'delivery') {
    if (!DELIVERY_VERBS.has(verb))
      throw new LakeshoreError(
        'forbidden',
        `a delivery token acts only on its own job (read, append, heartbeat, ack, nack); it may not ${SAID[verb]}`,
      );
    if (p.ns !== ns || (queue !== undefined && queue !== p.queue))
      throw new LakeshoreError('not_found', 'nothing here for this delivery token');
    return;
  }
  if (p.ns !== ns) throw new LakeshoreError('forbidden', `token ${p.id} belongs to another namespace`);
  if (ROOT_VERBS.has(verb)) throw new LakeshoreError('forbidden', `only the deployment's root token may ${SAID[verb]}`);
  if (p.role === 'admin') return;
  if (!(PERMISSIONS[verb] as readonly Role[]).includes(p.role))
    throw new LakeshoreError('forbidden', `a ${p.role} token may not ${SAID[verb]} ${whoMay(verb)}`);
  if (queue !== undefined && p.pools && POOL_VERBS.has(verb) && !p.pools.includes(queue)) {
    throw new LakeshoreError(
      'forbidden',
      `token ${p.id} may not ${SAID[verb]} on queue ${JSON.stringify(queue)}: its pools are ${p.pools.map((q) => JSON.stringify(q)).join(', ')}`,
    );
  }
}

const TOKEN = /^lsk_([a-z0-9]{16})_([A-Za-z0-9_-]{43})$/;

export async function sha256Hex(s: string): Promise<string> {
  return toHex(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(s))));
}

/** Compares two equal-length strings without an early exit. */
export function constantTimeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

function base64url(bytes: Uint8Array): string {
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export async function newToken(): Promise<{ id: string; token: string; digest: string }> {
  const id = toHex(crypto.getRandomValues(new Uint8Array(8)));
  const token = `lsk_${id}_${base64url(crypto.getRandomValues(new Uint8Array(32)))}`;
  return { id, token, digest: await sha256Hex(token) };
}

/** The id of a well-formed scoped token, or null. */
export const tokenId = (token: string): string | null => TOKEN.exec(token)?.[1] ?? null;

/**
 * A token's pools: they limit a worker token's claims, heartbeats, acks, nacks, appends and waits on results. A
 * producer or admin token acts on every queue of its namespace, so pools given it would promise a
 * limit that nothing keeps: refused, as an empty list (a worker that could serve nothing) is.
 */
export function checkPools(role: Role, pools: readonly string[]): readonly string[] {
  if (role !== 'worker')
    throw badRequest(
      `pools limit a worker token; ${role === 'admin' ? 'an' : 'a'} ${role} token acts on every queue of its namespace: leave pools out`,
    );
  if (!pools.length) throw badRequest('pools, when given, names at least one queue');
  return pools;
}

export function checkRole(v: unknown): Role {
  if (typeof v !== 'string' || !(ROLES as readonly string[]).includes(v))
    throw badRequest(`unknown role ${JSON.stringify(v)}: expected producer, worker or admin`);
  return v as Role;
}
