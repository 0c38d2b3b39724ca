/** The edge plane's operator commands: tokens, stream URLs, the shards and moving a namespace between them. */
import { HttpDispatch } from '../http/dispatch.ts';
import type { DispatchPlane, MoveReport } from '../types.ts';
import { EXIT, type Out } from './output.ts';
import { UsageError } from './usage.ts';

/** `lakeshore admin move-namespace NS --to SHARD`: the namespace's rows to another shard (the root token). */
export async function moveNamespace(d: DispatchPlane, out: Out, to: string | undefined) {
  const plane = shardPlane(d);
  if (!to) throw new UsageError('move-namespace needs --to SHARD (a D1 binding: DB, DB_1, ...)');
  const r = await plane.moveNamespace(to, { waitMs: 5_000, onProgress: progress(out) });
  out.print(r, moved(r));
  return EXIT.ok;
}

/**
 * `lakeshore admin shards [SHARD]`: each shard's storage against its budget and its namespaces'
 * count; with a shard, the namespaces on it (the root token).
 */
export async function shards(d: DispatchPlane, out: Out, shard: string | undefined) {
  const plane = shardPlane(d);
  if (shard !== undefined) {
    const ns = await plane.shardNamespaces(shard);
    if (out.json) for (const n of ns) out.print(n);
    else out.print(ns.map((n) => `${n.namespace}${n.state === 'moving' ? '  (moving)' : ''}`).join('\n') || `no namespace on ${shard}`);
    return EXIT.ok;
  }
  const all = await plane.shards();
  if (out.json) for (const s of all) out.print(s);
  else
    out.print(
      all
        .map((s) => {
          const used =
            s.bytes === null ? 'size unknown' : `${gb(s.bytes)} of ${gb(s.limitBytes)} (${((100 * s.bytes) / s.limitBytes).toFixed(1)} %)`;
          const ns = `${s.namespaces} namespace${s.namespaces === 1 ? '' : 's'}`;
          return `${s.shard.padEnd(6)}  ${used}  ${ns}${s.full ? `  FULL: past ${gb(s.highWaterBytes)}, submits refused` : ''}`;
        })
        .join('\n'),
    );
  return EXIT.ok;
}

const gb = (bytes: number) => (bytes >= 1e9 ? `${(bytes / 1e9).toFixed(2)} GB` : `${(bytes / 1e6).toFixed(1)} MB`);

/** `lakeshore admin move-status NS [--wait]`: where its move is, or (--wait) how it ended. */
export async function moveStatus(d: DispatchPlane, out: Out, wait: boolean) {
  const plane = shardPlane(d);
  let m = await plane.moveStatus();
  const say = progress(out);
  while (wait && m.state === 'moving') {
    say(m);
    m = await plane.moveStatus({ waitMs: 5_000 });
  }
  if (m.state === 'moving') out.print(m, moving(m));
  else if (m.state === 'moved') out.print(m, moved(m));
  else out.print(m, `the move of ${m.namespace} to ${m.to} was undone, and it stays on ${m.from}: ${m.error}`);
  return m.state === 'undone' ? EXIT.failed : EXIT.ok;
}

function shardPlane(d: DispatchPlane): HttpDispatch {
  if (!(d instanceof HttpDispatch))
    throw new UsageError("shards are the edge plane's: pass --url (or set LAKESHORE_URL) and the root --token");
  return d;
}

const moving = (m: MoveReport) => `moving ${m.namespace} to ${m.to}: ${m.phase}, ${m.jobs} jobs and ${m.frames} frames copied`;
const moved = (r: MoveReport) =>
  `moved ${r.namespace} from ${r.from} to ${r.to}: ${r.jobs} jobs, ${r.frames} frames, ${r.queues} queues' settings, ${r.schedules} schedules; writes waited ${r.fencedMs} ms`;

/** A long move's progress, on stderr, as it changes (not with --json). */
function progress(out: Out): (m: MoveReport) => void {
  let said = '';
  return (m) => {
    const now = moving(m);
    if (now !== said && !out.json) process.stderr.write(`${now}\n`);
    said = now;
  };
}

/** `lakeshore token create|list|revoke`: needs the edge plane and an admin token. */
export async function token(
  d: DispatchPlane,
  out: Out,
  action: string,
  arg: string | undefined,
  f: { role?: string; pool?: string[]; name?: string; rps?: string; burst?: string; streams?: string },
) {
  if (!(d instanceof HttpDispatch))
    throw new UsageError('tokens live on the edge plane: pass --url (or set LAKESHORE_URL) and an admin --token');
  if (action === 'create') {
    const role = f.role ?? arg;
    if (role !== 'producer' && role !== 'worker' && role !== 'admin')
      throw new UsageError('token create needs --role producer|worker|admin');
    const limit = (flag: string, v: string | undefined) => {
      if (v === undefined) return undefined;
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${flag} takes a positive integer, got ${JSON.stringify(v)}`);
      return n;
    };
    const limits = {
      requests_per_second: limit('rps', f.rps),
      request_burst: limit('burst', f.burst),
      streams: limit('streams', f.streams),
    };
    const own = Object.values(limits).some((v) => v !== undefined);
    const t = await d.createToken(role, { pools: f.pool, name: f.name, limits: own ? limits : undefined });
    out.print(
      t,
      `${t.token}\n\nid ${t.id}, role ${t.role}${t.pools ? `, pools ${t.pools.join(',')}` : ''}. This is the only time the token is shown.`,
    );
    return EXIT.ok;
  }
  if (action === 'list') {
    const ts = await d.listTokens();
    if (out.json) for (const t of ts) out.print(t);
    else
      out.print(
        ts
          .map(
            (t) =>
              `${t.id}  ${t.role.padEnd(8)}  ${t.revoked_at ? 'revoked' : 'active '}  ${t.pools ? t.pools.join(',') : '*'}  ${t.name ?? ''}`,
          )
          .join('\n') || 'no tokens',
      );
    return EXIT.ok;
  }
  if (action === 'revoke') {
    if (!arg) throw new UsageError('token revoke needs the token id');
    const revoked = await d.revokeToken(arg);
    out.print({ id: arg, revoked }, revoked ? `${arg}: revoked` : `${arg}: was already revoked`);
    return EXIT.ok;
  }
  throw new UsageError(`unknown token action ${JSON.stringify(action)}: create, list or revoke`);
}

/** `lakeshore stream-url <id>`: a stream token's URL, for a browser's EventSource (edge plane). */
export async function streamUrl(d: DispatchPlane, out: Out, id: string, f: { ttl: string; streams?: string }) {
  if (!(d instanceof HttpDispatch))
    throw new UsageError('stream tokens live on the edge plane: pass --url (or set LAKESHORE_URL) and a producer --token');
  const ttl = Number(f.ttl);
  if (!Number.isFinite(ttl) || ttl <= 0) throw new UsageError(`--ttl takes seconds, got ${JSON.stringify(f.ttl)}`);
  const streams = f.streams === undefined ? undefined : Number(f.streams);
  const t = await d.streamToken(id, { ttlMs: Math.round(ttl * 1000), streams });
  out.print(t, t.url);
  return EXIT.ok;
}
