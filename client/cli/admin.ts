/** The edge plane's operator commands: tokens, stream URLs and moving a namespace between shards. */
import { HttpDispatch } from '../http/dispatch.ts';
import type { DispatchPlane } from '../types.ts';
import { EXIT, type Out } from './output.ts';
import { UsageError } from './usage.ts';

/** `lakeshore admin move-namespace NS --to SHARD`: the namespace's rows to another shard (the root token). */
export async function moveNamespace(d: DispatchPlane, out: Out, to: string | undefined) {
  if (!(d instanceof HttpDispatch))
    throw new UsageError("shards are the edge plane's: pass --url (or set LAKESHORE_URL) and the root --token");
  if (!to) throw new UsageError('move-namespace needs --to SHARD (a D1 binding: DB, DB_1, ...)');
  let said = '';
  const r = await d.moveNamespace(to, {
    waitMs: 5_000,
    // A large namespace takes a while: where it is, on stderr, as it changes.
    onProgress: (m) => {
      const now = `moving ${m.namespace} to ${m.to}: ${m.phase}, ${m.jobs} jobs and ${m.frames} frames copied`;
      if (now !== said && !out.json) process.stderr.write(`${now}\n`);
      said = now;
    },
  });
  out.print(
    r,
    `moved ${r.namespace} from ${r.from} to ${r.to}: ${r.jobs} jobs, ${r.frames} frames, ${r.queues} queues' settings, ${r.schedules} schedules; writes waited ${r.fencedMs} ms`,
  );
  return EXIT.ok;
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
