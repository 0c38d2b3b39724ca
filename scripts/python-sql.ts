/**
 * Writes client/python/lakeshore/sql.json: the SQL the Python local plane runs, taken from the
 * TypeScript core rather than written twice. The migrations (the files D1 and the Node local
 * plane apply) and, for each verb, the statements the core's plans build for one item on a plane
 * with no single writer (the local plane's case), each with the names of its parameters.
 *
 * A plan builder is called with a sentinel for every input; each bound parameter is mapped back
 * to the input it came from, so Python binds them by name. A parameter that is no input (a value
 * the builder computed) fails the generation: the artifact never carries a guess.
 *
 *   npm run python-sql                # writes the artifact (after a change to src/core's SQL or the migrations)
 *   npm run python-sql -- --check     # exits 1 when it is stale (test/node/python-local.test.ts runs it)
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_LIMITS } from '../src/core/limits.ts';
import { claimPlan } from '../src/core/claims.ts';
import { submitPlan } from '../src/core/sql/submit.ts';
import { ackPlan } from '../src/core/sql/ack.ts';
import { nackPlan } from '../src/core/sql/nack.ts';
import { heartbeatPlan } from '../src/core/sql/heartbeat.ts';
import { cancelPlan } from '../src/core/sql/cancel.ts';
import { appendPlan } from '../src/core/sql/append.ts';
import { readPlan } from '../src/core/sql/journal-read.ts';
import { trimPlan } from '../src/core/sql/trim.ts';
import { countPlan, endedPlan, endedValues, getManyPlan, getPlan, queuesPlan } from '../src/core/sql/read.ts';
import { listPlan, overviewPlan } from '../src/core/sql/list.ts';
import { STATES, type State } from '../src/core/states.ts';
import { configurePlan, pausePlan, queueInfoPlan } from '../src/core/sql/configure.ts';
import { releasePlan } from '../src/core/sql/release.ts';
import { purgePlan } from '../src/core/sql/purge.ts';
import { PURGE_BATCH } from '../src/core/admin.ts';
import { PURGE_ROUNDS } from '../src/core/retention.ts';
import { redriveDeadLettersPlan, redrivePlan, retryPlan } from '../src/core/sql/retry.ts';
import { deletePlan, purgeStatePlan } from '../src/core/sql/delete.ts';
import { CLAIM_BYTES, claimStmts } from '../src/core/sql/claim.ts';
import { dueSchedulesPlan, listSchedulesPlan, removeSchedulePlan, setSchedulePlan, tickPlan } from '../src/core/sql/schedules.ts';
import { CRON_SYNTAX } from '../src/core/cron.ts';
import { PUSH_BACKOFF, PUSH_WORKER_ID } from '../src/core/push-port.ts';
import { storedBackoff } from '../src/core/requests.ts';
import type { Plan } from '../src/core/plan.ts';
import type { Stmt } from '../src/core/port.ts';

const root = join(import.meta.dirname, '..');
const OUT = join(root, 'client', 'python', 'lakeshore', 'sql.json');

// Sentinels: one distinct value per input. Numbers are large and odd so no arithmetic collides.
const S = {
  now: 9_000_000_000_001,
  ns: '«ns»',
  queue: '«queue»',
  id: '«id»',
  key: '«key»',
  priority: 9_000_000_000_003.5,
  parent: '«parent»',
  envelope: new Uint8Array([0xfe, 0xed, 0x01]),
  run_at: 9_000_000_000_005,
  expires_at: 9_000_000_000_007,
  max_attempts: 9_000_000_009,
  worker_id: '«worker_id»',
  attempt: 9_000_000_011,
  lease_ms: 9_000_000_013,
  default_lease_ms: 9_000_000_015,
  result: new Uint8Array([0xfe, 0xed, 0x02]),
  error: '«error»',
  default_max_attempts: 9_000_000_017,
  delay_ms: 9_000_000_019,
  default_backoff: '«default_backoff»',
  seq: 9_000_000_021,
  kind: 9_000_000_023,
  body: new Uint8Array([0xfe, 0xed, 0x03]),
  meta: '«meta»',
  final: 9_000_000_025,
  max_frames: 9_000_000_027,
  since: 9_000_000_029,
  limit: 9_000_000_031,
  keep_last: 9_000_000_033,
  state: 'queued',
  default_retention_ms: 9_000_000_043,
  after_key: 9_000_000_037,
  after_rid: 9_000_000_039,
  level: 9_000_000_041.5,
  name: '«name»',
  ids: '«ids»',
  cron: '«cron»',
  timezone: '«timezone»',
  next_at: 9_000_000_045,
  tick: 9_000_000_047,
  next: 9_000_000_049,
  error_json: '{"message":"«error»"}',
  meta_json: '"«meta»"',
  patch_json: '{"lease_ms":9000000035}',
  handed_json: '[["«id»",9000000011]]',
} as const;

const nameOf = (v: unknown): string => {
  for (const [k, s] of Object.entries(S)) {
    if (s instanceof Uint8Array ? v instanceof Uint8Array && v.length === s.length && v.every((b, i) => b === s[i]) : Object.is(v, s))
      return k;
  }
  if (v === null) return 'null';
  if (typeof v === 'number' && Number.isInteger(v) && Math.abs(v) < 1_000_000) return `=${v}`; // a constant the builder chose
  if (v === S.limit + 1) return 'limit+1'; // a page reads one more row than it answers
  if (v === Number.MAX_SAFE_INTEGER) return '=max_safe_integer';
  throw new Error(`a parameter that is no input: ${JSON.stringify(v)}`);
};

const statement = (s: Stmt) => ({ sql: s.sql.replace(/\s+/g, ' ').trim(), params: s.args.map(nameOf) });
const statements = (p: Plan<unknown>) => p.stmts.map(statement);
/** The plan a plan's answer to empty results asks for next (the diagnosis of a miss). */
function followUp(p: Plan<unknown>): { sql: string; params: string[] }[] {
  const next = p.done(p.stmts.map(() => ({ rows: [], changes: 0 }) as never)) as unknown;
  const plan = (next as { plan?: Plan<unknown> }).plan;
  if (!plan) throw new Error('expected a follow-up plan');
  return statements(plan);
}

const holder = { workerId: S.worker_id, attempt: S.attempt };
/** A listing cursor (sql/list.ts: base64url JSON of [state, sort key, rid]) naming the sentinels. */
const cursor = (st: State) =>
  Buffer.from(JSON.stringify([st, ['succeeded', 'failed', 'cancelled'].includes(st) ? null : S.after_key, S.after_rid])).toString(
    'base64url',
  );
const submitItem = {
  id: S.id,
  envelope: S.envelope,
  key: S.key,
  priority: S.priority,
  parent: S.parent,
  runAt: S.run_at,
  expiresAt: S.expires_at,
  maxAttempts: S.max_attempts,
};
const claimCtx = {
  now: S.now,
  ns: S.ns,
  queue: S.queue,
  limits: { ...DEFAULT_LIMITS, defaultLeaseMs: S.default_lease_ms, defaultMaxAttempts: S.default_max_attempts },
  random: Math.random,
  sampled: new Set<string>(),
  workers: new Map<string, number | null>(),
};
const submit = submitPlan(S.now, S.ns, S.queue, [submitItem]);
const ack = ackPlan(S.now, S.ns, [{ id: S.id, queue: S.queue, holder, result: S.result }]);
const nackRetry = nackPlan(
  S.now,
  S.ns,
  S.id,
  S.queue,
  holder,
  { message: S.error },
  true,
  S.default_max_attempts,
  S.delay_ms,
  S.default_backoff,
);
const heartbeat = heartbeatPlan(S.now, S.ns, S.id, S.queue, holder, S.lease_ms, S.default_lease_ms);
const cancel = cancelPlan(S.now, S.ns, S.id, S.queue);
const retry = retryPlan(S.now, S.ns, S.id, S.queue);
const del = deletePlan(S.ns, S.id, S.queue);
const frame = { seq: S.seq, kind: S.kind as 0, body: S.body, meta: S.meta as never };
const append = appendPlan(S.now, S.ns, S.id, S.queue, holder, { ...frame, final: true }, S.max_frames);

const schedule = {
  queue: S.queue,
  name: S.name,
  cron: S.cron,
  timezone: S.timezone,
  envelope: S.envelope,
  priority: S.priority,
  nextAt: S.next_at,
  lastAt: null,
};

const artifact = {
  generated_by: 'scripts/python-sql.ts from src/core: do not edit (npm run python-sql)',
  limits: {
    default_lease_ms: DEFAULT_LIMITS.defaultLeaseMs,
    default_max_attempts: DEFAULT_LIMITS.defaultMaxAttempts,
    max_frames: DEFAULT_LIMITS.framesPerInvocation,
    default_retention_ms: DEFAULT_LIMITS.defaultRetentionMs,
    purge_batch: PURGE_BATCH,
    purge_rounds: PURGE_ROUNDS,
    envelope_bytes: DEFAULT_LIMITS.envelopeBytes,
    push_worker_id: PUSH_WORKER_ID,
    push_backoff: storedBackoff(PUSH_BACKOFF),
    result_bytes: DEFAULT_LIMITS.resultBytes,
    frame_bytes: DEFAULT_LIMITS.frameBytes,
    claim_bytes: CLAIM_BYTES,
  },
  cron_syntax: CRON_SYNTAX,
  migrations: readdirSync(join(root, 'migrations'))
    .filter((f) => f.endsWith('.sql'))
    .sort()
    .map((name) => ({ name, sql: readFileSync(join(root, 'migrations', name), 'utf8') })),
  verbs: {
    submit: statements(submit),
    submit_existing: followUp(submit),
    claim_fifo: statements(claimPlan(claimCtx, { workerId: S.worker_id, kind: 'fifo', leaseMs: S.lease_ms, temperature: 1 }, 1)),
    claim_filo: statements(claimPlan(claimCtx, { workerId: S.worker_id, kind: 'filo', leaseMs: S.lease_ms, temperature: 1 }, 1)),
    claim_many_fifo: statements(claimPlan(claimCtx, { workerId: S.worker_id, kind: 'fifo', leaseMs: S.lease_ms, temperature: 1 }, S.limit)),
    boltzmann_levels: statements(
      claimPlan(claimCtx, { workerId: S.worker_id, kind: 'boltzmann', leaseMs: S.lease_ms, temperature: 1 }, S.limit),
    ),
    claim_level: claimStmts(
      S.now,
      S.ns,
      S.queue,
      { workerId: S.worker_id, kind: 'fifo', leaseMs: S.lease_ms },
      S.default_lease_ms,
      S.level,
      S.limit,
    ).map(statement),
    claim_many_filo: statements(claimPlan(claimCtx, { workerId: S.worker_id, kind: 'filo', leaseMs: S.lease_ms, temperature: 1 }, S.limit)),
    ack: statements(ack),
    ack_missed: followUp(ack),
    nack_retry: statements(nackRetry),
    nack_fail: statements(
      nackPlan(S.now, S.ns, S.id, S.queue, holder, { message: S.error }, false, S.default_max_attempts, S.delay_ms, S.default_backoff),
    ),
    nack_missed: followUp(nackRetry),
    heartbeat: statements(heartbeat),
    heartbeat_missed: followUp(heartbeat),
    cancel: statements(cancel),
    cancel_missed: followUp(cancel),
    append: statements(appendPlan(S.now, S.ns, S.id, S.queue, holder, { ...frame, final: false }, S.max_frames)),
    append_final: statements(append),
    append_missed: followUp(append),
    read: statements(readPlan(S.ns, S.id, S.since, S.limit, S.queue)),
    trim: statements(trimPlan(S.ns, S.id, S.queue, S.keep_last)),
    get: statements(getPlan(S.ns, S.id, S.queue)),
    get_many: statements(getManyPlan(S.ns, S.ids)),
    configure: statements(configurePlan(S.now, S.ns, S.queue, { lease_ms: 9_000_000_035 })),
    pause: statements(pausePlan(S.now, S.ns, S.queue, true)),
    resume: statements(pausePlan(S.now, S.ns, S.queue, false)),
    queue_info: statements(queueInfoPlan(S.ns, S.queue)),
    release: statements(releasePlan(S.now, S.ns, S.queue, S.worker_id, [{ id: S.id, attempt: S.attempt }])),
    queues: statements(queuesPlan(S.ns)),
    overview: statements(overviewPlan(S.now, S.ns, [S.queue])),
    ...Object.fromEntries(
      STATES.flatMap((st) => [
        [`list_${st}`, statements(listPlan(S.ns, S.queue, st, S.limit, null))],
        [`list_${st}_after`, statements(listPlan(S.ns, S.queue, st, S.limit, cursor(st)))],
      ]),
    ),
    purge: statements(purgePlan(S.now, S.ns, S.queue, S.default_retention_ms, PURGE_BATCH)),
    retry: statements(retry),
    retry_missed: followUp(retry),
    delete: statements(del),
    delete_missed: followUp(del),
    purge_finished: statements(purgeStatePlan(S.ns, S.queue, S.state as 'failed', S.limit)),
    redrive: statements(redrivePlan(S.now, S.ns, S.queue, S.limit)),
    redrive_dead_letters: statements(redriveDeadLettersPlan(S.now, S.ns, S.queue, S.limit)),
    count: statements(countPlan(S.ns, S.queue, S.state)),
    ended: statements(endedPlan(S.ns, S.queue, S.ids)),
    ended_values: [statement(endedValues(S.ids))],
    set_schedule: statements(
      setSchedulePlan(S.now, S.ns, S.queue, {
        name: S.name,
        cron: S.cron,
        timezone: S.timezone,
        envelope: S.envelope,
        priority: S.priority,
        nextAt: S.next_at,
      }),
    ),
    list_schedules: statements(listSchedulesPlan(S.ns, S.queue)),
    remove_schedule: statements(removeSchedulePlan(S.ns, S.queue, S.name)),
    due_schedules: statements(dueSchedulesPlan(S.now, S.ns, S.queue)),
    tick: statements(tickPlan(S.now, S.ns, schedule, S.tick, S.next)),
  },
};

const text = `${JSON.stringify(artifact, null, 1)}\n`;
if (process.argv.includes('--check')) {
  let old = '';
  try {
    old = readFileSync(OUT, 'utf8');
  } catch {
    /* missing: stale */
  }
  if (old !== text) {
    console.error(`${OUT} is stale: run \`npm run python-sql\` and commit it`);
    process.exit(1);
  }
  console.log('client/python/lakeshore/sql.json is up to date');
} else {
  writeFileSync(OUT, text);
  console.log(`wrote ${OUT}: ${artifact.migrations.length} migrations, ${Object.keys(artifact.verbs).length} verbs`);
}
