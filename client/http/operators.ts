/**
 * The operators' verbs of the HTTP client (HttpDispatch extends this): the namespace's views,
 * queue settings, pause and resume, redrive, schedules, tokens, the lifecycle feed and metrics.
 */
import { toBase64 } from '../../src/core/bytes.ts';
import { LakeshoreError } from '../errors.ts';
import { MAX_NAMED_QUEUES } from '../../src/core/limits.ts';
import type * as wire from '../../src/core/wire-types.ts';
import type { TokenLimits } from '../../src/core/wire-types.ts';
import type {
  FeedItem,
  MoveReport,
  ShardInfo,
  ShardNamespace,
  StorageState,
  FeedOptions,
  InvocationPage,
  InvocationSummary,
  LogLine,
  ListOptions,
  QueueInfo,
  QueueOverview,
  QueuePage,
  Schedule,
  ScheduleOptions,
  SettingsChange,
  WorkerSeen,
} from '../types.ts';
import { followFeed, settingsWire } from './observe.ts';
import { errorOf, type Transport } from './transport.ts';
import { fetchCode, pushCode, type PushedCode } from './code.ts';
import { overviewOf, queueInfoOf, queuePath, scheduleOf, seg, summaryOf, type Json } from './wire.ts';
import { mergeMetricPages, mergeWorkerPages, morePagesAfter } from './pages.ts';

export class HttpOperators {
  protected readonly http: Transport;

  constructor(http: Transport) {
    this.http = http;
  }

  /** Each queue (or those named, in that order; one that never held work answered empty, as on the local plane). */
  async overview(queues?: string[]): Promise<QueueOverview[]> {
    const read = async (path: string) => ((await this.http.call('GET', path)).queues as Json[]).map(overviewOf);
    if (!queues?.length) return (await this.pages('/queues', (j) => j.queues as Json[])).map(overviewOf);
    // Only the queues named are read (`?queue=`, up to 100 a request), each once; one that never
    // held work is answered empty by the plane.
    const names = [...new Set(queues)];
    const parts: Promise<QueueOverview[]>[] = [];
    for (let i = 0; i < names.length; i += MAX_NAMED_QUEUES)
      parts.push(
        read(
          `/queues?${names
            .slice(i, i + MAX_NAMED_QUEUES)
            .map((q) => `queue=${seg('queue', q)}`)
            .join('&')}`,
        ),
      );
    const named = new Map((await Promise.all(parts)).flat().map((q) => [q.queue, q]));
    return queues.map((name) => named.get(name) ?? raiseMissing(name));
  }

  async overviewPage(opts: { after?: string | null; limit?: number } = {}): Promise<QueuePage> {
    const q = [
      ...(opts.after ? [`after=${encodeURIComponent(opts.after)}`] : []),
      ...(opts.limit === undefined ? [] : [`limit=${encodeURIComponent(String(opts.limit))}`]),
    ];
    const j = await this.http.call('GET', q.length ? `/queues?${q.join('&')}` : '/queues');
    return { queues: (j.queues as Json[]).map(overviewOf), next: typeof j.next === 'string' ? j.next : null };
  }

  async storage(): Promise<StorageState> {
    return storageOf(await this.http.call('GET', '/storage'));
  }

  async getMany(ids: string[]): Promise<(InvocationSummary | null)[]> {
    const out = await this.http.call('POST', '/invocations/get', { ids } satisfies wire.GetManyWire);
    return (out.items as (Json | null)[]).map((i) => (i === null ? null : summaryOf(i)));
  }

  async list(queue: string, opts: ListOptions = {}): Promise<InvocationPage> {
    const p = new URLSearchParams({
      state: opts.state ?? 'queued',
      ...(opts.limit === undefined ? {} : { limit: String(opts.limit) }),
      ...(opts.cursor ? { cursor: opts.cursor } : {}),
    });
    const out = await this.http.call('GET', `${queuePath(queue)}/invocations?${p}`);
    return { items: (out.items as Json[]).map(summaryOf), cursor: (out.cursor as string | null) ?? null };
  }

  // ------------------------------------------------------------ shards (edge plane only; the root token)

  /** The deployment's shards, each one's storage against its budget and how many namespaces live on it. */
  async shards(): Promise<ShardInfo[]> {
    const j = await this.http.call('GET', '/v1/shards');
    return (j.shards as Json[]).map((s) => ({ ...storageOf(s), namespaces: Number(s.namespaces) }));
  }

  /** The namespaces on one shard, in name order (every page of `GET /v1/shards/:shard/namespaces`). */
  async shardNamespaces(shard: string): Promise<ShardNamespace[]> {
    const all = await this.pages(`/v1/shards/${seg('shard', shard)}/namespaces`, (j) => j.namespaces as Json[]);
    return all.map((n) => ({
      namespace: String(n.namespace),
      state: n.state === 'moving' ? 'moving' : 'active',
      placedAt: Number(n.placed_at),
    }));
  }

  /**
   * Moves this namespace's rows to another shard (docs/deploy.md, "Moving a namespace"): its
   * writes wait a moment (503s that the clients retry), nothing is lost or repeated. The plane
   * moves it in steps of its own; this waits for the end, telling `onProgress` where it is after
   * each wait (every `waitMs`, 30 s by default), and throws if the move was undone.
   */
  async moveNamespace(to: string, opts: { onProgress?: (m: MoveReport) => void; waitMs?: number } = {}): Promise<MoveReport> {
    let m = moveOf(await this.http.call('POST', '/move', { to }));
    while (m.state === 'moving') {
      opts.onProgress?.(m);
      m = await this.moveStatus({ waitMs: opts.waitMs ?? 30_000 });
    }
    if (m.state === 'undone')
      throw new LakeshoreError('internal', `the move of ${m.namespace} to ${m.to} was undone, and it stays on ${m.from}: ${m.error}`);
    return m;
  }

  /** Where this namespace's move is (the last one, once ended); `waitMs`: once it ends, or that has passed (at most 60 s). */
  async moveStatus(opts: { waitMs?: number } = {}): Promise<MoveReport> {
    const wait = opts.waitMs ?? 0;
    return moveOf(await this.http.call('GET', `/move${wait ? `?wait_ms=${wait}` : ''}`, undefined, { waitMs: wait }));
  }

  // ------------------------------------------------------------ tokens (edge plane only)

  /** Creates a namespace-scoped token; the answer holds the token itself, shown this once. */
  async createToken(
    role: 'producer' | 'worker' | 'admin',
    opts: { pools?: string[]; name?: string; limits?: TokenLimits } = {},
  ): Promise<{ token: string; id: string; role: string; pools: string[] | null; name: string | null; limits: TokenLimits | null }> {
    return (await this.http.call('POST', '/tokens', {
      role,
      pools: opts.pools ?? null,
      name: opts.name ?? null,
      limits: opts.limits ?? null,
    } satisfies wire.TokenWire)) as never;
  }

  async listTokens(): Promise<
    { id: string; role: string; pools: string[] | null; name: string | null; created_at: number; revoked_at: number | null }[]
  > {
    return (await this.http.call('GET', '/tokens')).tokens as never;
  }

  /** Revokes at once; false when it was already revoked. */
  async revokeToken(id: string): Promise<boolean> {
    return (await this.http.call('DELETE', `/tokens/${seg('token id', id)}`)).revoked === true;
  }

  async configureQueue(queue: string, s: SettingsChange): Promise<QueueInfo> {
    return queueInfoOf(await this.http.call('PUT', `${queuePath(queue)}`, settingsWire(s)));
  }

  /** The queue's lifecycle feed, live (observe.ts); ends when `signal` aborts. */
  events(queue: string | null, opts: FeedOptions = {}): AsyncIterable<FeedItem> {
    const q = new URLSearchParams(queue === null ? {} : { queue });
    if (opts.kinds) q.set('kinds', opts.kinds.join(','));
    q.set('batch', '1');
    const query = `?${q}`;
    return followFeed(opts.signal, (last, signal) =>
      this.http.fetch(`/events${query}`, { headers: { accept: 'text/event-stream', ...(last ? { 'last-event-id': last } : {}) }, signal }),
    );
  }

  /** The workers heard from lately, each once across its queues (docs/contract.md, "Workers"). */
  async workers(): Promise<WorkerSeen[]> {
    // A page answers the workers of up to 100 queues; one that works queues on two pages is merged here.
    return mergeWorkerPages(await this.pages('/workers', (j) => j.workers as WorkerSeen[]));
  }

  /**
   * Every page of a view the plane answers in pages (a namespace's queues, at most 100 a request,
   * its calls to their objects being bounded; a shard's namespaces) and says which name to ask
   * `after` next (docs/contract.md, "Views").
   */
  protected async pages<T>(path: string, items: (j: Json) => T[]): Promise<T[]> {
    const out: T[] = [];
    for (let after: string | null = ''; after !== null; ) {
      const j: Json = await this.http.call('GET', after ? `${path}?after=${encodeURIComponent(after)}` : path);
      out.push(...items(j));
      after = typeof j.next === 'string' ? j.next : null;
    }
    return out;
  }

  /** Tells the plane that this worker stops (runWorker does, at shutdown): the feed says stopped, not lost. */
  async workerStopped(queue: string, workerId: string): Promise<void> {
    // Best effort, one try (as Python's): a stopping worker does not wait for a plane that is away.
    await this.http.call('POST', `${queuePath(queue)}/workers/${seg('worker_id', workerId)}/stop`, undefined, { retryForMs: 0 });
  }

  async workerLog(queue: string, workerId: string, lines: LogLine[]): Promise<void> {
    await this.http.call('POST', `${queuePath(queue)}/workers/${seg('worker_id', workerId)}/log`, { lines });
  }

  /**
   * Pushes the git tree of `cwd` (default: this process's directory) to the plane once per tree,
   * answering its stamp (docs/code-mount.md). Node only; a tree with uncommitted changes is refused.
   */
  pushCode(opts: { cwd?: string } = {}): Promise<PushedCode> {
    return pushCode(this.http, opts.cwd ?? (globalThis as { process?: { cwd(): string } }).process?.cwd() ?? '.');
  }

  /** A pushed tree's archive and its SHA-256, for a worker that mounts pushed code (client/worker/mount.ts). */
  fetchCode(stamp: string): Promise<{ bytes: Uint8Array; sha256: string | null }> {
    return fetchCode(this.http, stamp);
  }

  /** The namespace's metrics, in the Prometheus text format. */
  async metrics(): Promise<string> {
    const pages: string[] = [];
    for (let after: string | null = ''; after !== null; ) {
      const res = await this.http.fetch(after ? `/metrics?after=${encodeURIComponent(after)}` : '/metrics', { headers: {} });
      if (!res.ok) throw await errorOf(res);
      const text = await res.text();
      pages.push(text);
      after = morePagesAfter(text);
    }
    return pages.length === 1 ? pages[0]! : mergeMetricPages(pages);
  }

  async queueInfo(queue: string): Promise<QueueInfo> {
    return queueInfoOf(await this.http.call('GET', `${queuePath(queue)}`));
  }

  async pauseQueue(queue: string): Promise<void> {
    await this.http.call('POST', `${queuePath(queue)}/pause`);
  }

  async resumeQueue(queue: string): Promise<void> {
    await this.http.call('POST', `${queuePath(queue)}/resume`);
  }

  async purge(queue: string, opts: { state: 'succeeded' | 'failed' | 'cancelled'; limit?: number }): Promise<number> {
    const out = await this.http.call('POST', `${queuePath(queue)}/purge`, {
      state: opts.state,
      limit: opts.limit ?? null,
    } satisfies wire.PurgeWire);
    return Number(out.purged);
  }

  async redrive(queue: string, opts: { limit?: number; deadLetters?: boolean } = {}): Promise<{ id: string; queue: string }[]> {
    const out = await this.http.call('POST', `${queuePath(queue)}/redrive`, {
      limit: opts.limit,
      dead_letters: opts.deadLetters,
    } satisfies wire.RedriveWire);
    return (out.redriven as Json[]).map((r) => ({ id: String(r.id), queue: String(r.queue) }));
  }

  async setSchedule(queue: string, name: string, opts: ScheduleOptions): Promise<Schedule> {
    const body = {
      cron: opts.cron,
      timezone: opts.timezone ?? null,
      envelope: toBase64(opts.envelope),
      priority: opts.priority ?? 0,
    } satisfies wire.ScheduleWire;
    return scheduleOf(await this.http.call('PUT', `${queuePath(queue)}/schedules/${seg('schedule name', name)}`, body));
  }

  async listSchedules(queue: string): Promise<Schedule[]> {
    return ((await this.http.call('GET', `${queuePath(queue)}/schedules`)).schedules as Json[]).map(scheduleOf);
  }

  async removeSchedule(queue: string, name: string): Promise<void> {
    await this.http.call('DELETE', `${queuePath(queue)}/schedules/${seg('schedule name', name)}`);
  }
}

/** The plane answers every queue an overview names (one that never held work, empty): a missing one is the plane's fault. */
function raiseMissing(queue: string): never {
  throw new LakeshoreError('internal', `the plane's overview left out the queue ${JSON.stringify(queue)} it was asked for`);
}

const storageOf = (j: Json): StorageState => ({
  shard: String(j.shard),
  bytes: j.bytes === null ? null : Number(j.bytes),
  limitBytes: Number(j.limit_bytes),
  highWaterBytes: Number(j.high_water_bytes),
  full: j.full === true,
});

const moveOf = (j: Json): MoveReport => ({
  namespace: String(j.namespace),
  from: String(j.from),
  to: String(j.to),
  state: j.state as MoveReport['state'],
  phase: String(j.phase),
  jobs: Number(j.jobs),
  frames: Number(j.frames),
  queues: Number(j.queues),
  schedules: Number(j.schedules),
  objects: Number(j.objects),
  caughtUp: Number(j.caught_up),
  fencedMs: Number(j.fenced_ms),
  ms: Number(j.ms),
  steps: Number(j.steps),
  mostSubrequestsAStep: Number(j.most_subrequests_a_step),
  rowsRead: Number(j.rows_read),
  error: (j.error as string | null) ?? null,
});
