/**
 * lakeshore: the command line. Talks to the edge plane with --url (or LAKESHORE_URL), otherwise
 * to the local SQLite plane in $LAKESHORE_HOME (default ~/.lakeshore). Flags win over the
 * environment. `--json` prints one JSON object per line for scripts.
 */
import { Command, CommanderError, Option } from 'commander';
import * as cmd from './commands.ts';
import * as op from './operate.ts';
import * as watch from './watch.ts';
import { EXIT, exitCodeOf, output } from './output.ts';
import { planeFromEnv } from '../default.ts';
import { UnavailableError } from '../errors.ts';
import type { DispatchPlane } from '../types.ts';
import { push as pushCmd } from './push.ts';
import { type Global, type Run, workerCommands } from './worker-commands.ts';

/** A flag's number of seconds (0 or more): anything else is the command line's mistake (exit 2), not a wait forever. */
const seconds = (flag: string, v: string): number => {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < 0)
    throw new cmd.UsageError(`${flag} takes a number of seconds (0: no limit), got ${JSON.stringify(v)}`);
  return n;
};
/** A period in seconds, more than 0 (0 or no number would redraw as fast as the plane answers). */
const positiveSeconds = (flag: string, v: string): number => {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n <= 0)
    throw new cmd.UsageError(`${flag} takes a number of seconds more than 0, got ${JSON.stringify(v)}`);
  return n;
};
/** A flag's integer, at least `min`. */
const integer = (flag: string, v: string, min: number): number => {
  const n = Number(v);
  if (v.trim() === '' || !Number.isInteger(n) || n < min)
    throw new cmd.UsageError(`${flag} takes an integer of at least ${min}, got ${JSON.stringify(v)}`);
  return n;
};

export const program = new Command('lakeshore')
  .description('Submit, run and watch lakeshore jobs on the edge plane or the local SQLite plane.')
  .option('--url <url>', 'edge plane URL (env LAKESHORE_URL); without it, the local SQLite plane')
  .option('--token <token>', 'bearer token (env LAKESHORE_TOKEN)')
  .option('--namespace <ns>', 'namespace (env LAKESHORE_NAMESPACE, default "default")')
  .option('--home <dir>', 'local plane directory (env LAKESHORE_HOME, default ~/.lakeshore)')
  .option('--json', 'print JSON lines instead of text')
  .showHelpAfterError()
  .exitOverride();

let code: number = EXIT.ok;
const run: Run =
  (fn, opts = {}) =>
  async () => {
    const g = program.opts<Global>();
    if (opts.plane !== false && !(g.url || process.env.LAKESHORE_URL)) await loadLocalPlane();
    try {
      code = await fn(g);
    } finally {
      // A local plane writes what its verbs told the feed as it closes: a command that exits at
      // once must not leave a reader waiting for it (client/local/feed-log.ts).
      await Promise.all(planes.splice(0).map((p) => p.close().catch(() => {})));
    }
  };

/** The local SQLite plane, loaded only when a command needs it (no URL): node:sqlite needs Node >= 22.12. */
async function loadLocalPlane() {
  try {
    await import('../local/default.ts');
  } catch (e) {
    // client/local/sqlite.ts names the Node it needs and the way out (an edge plane's URL).
    throw new cmd.UsageError(e instanceof Error ? e.message : String(e));
  }
}
/** Asks on the terminal; where stdin is none, says how to confirm instead. */
async function confirm(question: string): Promise<boolean> {
  if (!process.stdin.isTTY)
    throw new cmd.UsageError(`${question.replace(/\s*\[y\/N\]\s*$/, '')} Not asked: stdin is not a terminal; pass --yes to confirm`);
  const { createInterface } = await import('node:readline/promises');
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(question)).trim());
  } finally {
    rl.close();
  }
}

/** The plane; one that cannot be reached is said at once, while the client retries. */
let warned = false;
/** The planes this command made, closed when it ends. */
const planes: DispatchPlane[] = [];
const planeOf = (g: Global) => {
  const p = planeFromEnv(process.env, {
    ...g,
    onUnreachable: (m) => {
      if (!warned) process.stderr.write(`lakeshore: ${m}\n`);
      warned = true;
    },
  });
  planes.push(p);
  return p;
};

program
  .command('submit')
  .description('submit FN(ARGS) to QUEUE; prints the invocation id')
  .argument('<queue>', 'pool to submit to')
  .argument('<fn>', 'function name, as the worker registers it (or pkg.mod:func, for a Python worker with a root)')
  .argument('[args]', 'JSON array of arguments (a single value is one argument)')
  .option('--kwargs <json>', 'JSON object of keyword arguments')
  .option('--id <id>', 'invocation id (default: 20 letters and digits, time first)')
  .option('--key <key>', 'idempotency key: resubmitting it answers the existing invocation')
  .option('--priority <n>', 'higher is claimed first')
  .option('--module <ref>', 'where the worker may import FN from (path#export, or pkg.mod:func), if it allows imports')
  .option(
    '--code <push|stamp>',
    "push: this directory's git tree goes to the plane (once per tree) and the job runs FN from it on workers started with --code mount",
  )
  .option('--time-limit-ms <ms>', 'abort and nack the job past this')
  .option('--max-retries <n>', 'retry a failure only while attempt <= n')
  .option('--max-attempts <n>', "this job's attempt budget (default: its queue's)")
  .option('--delay-ms <ms>', 'not claimable before this many ms from now')
  .option('--ttl-ms <ms>', 'fail as Expired if not claimed within this many ms')
  .action((queue: string, fn: string, args: string | undefined, o: Record<string, string>) =>
    run((g) => cmd.submit(planeOf(g), output(!!g.json), queue, fn, args, o))(),
  );

program
  .command('retry')
  .description('put a failed invocation back in its queue, with a fresh attempt budget')
  .argument('<id>')
  .action((id: string) => run((g) => op.retry(planeOf(g), output(!!g.json), id))());

program
  .command('redrive')
  .description("retry a queue's failed invocations, oldest first")
  .argument('<queue>')
  .option('--limit <n>', 'at most this many', '100')
  .option('--dead-letters', "on a dead-letter queue: send its dead letters' failed jobs back to their queues")
  .action((queue: string, o: { limit?: string; deadLetters?: boolean }) =>
    run((g) => op.redrive(planeOf(g), output(!!g.json), queue, o))(),
  );

program
  .command('pause')
  .description('stop handing out jobs of a queue (it still takes submits)')
  .argument('<queue>')
  .action((queue: string) => run((g) => op.pause(planeOf(g), output(!!g.json), queue, true))());

program
  .command('resume')
  .description('hand out jobs of a paused queue again')
  .argument('<queue>')
  .action((queue: string) => run((g) => op.pause(planeOf(g), output(!!g.json), queue, false))());

program
  .command('queue')
  .description("show a queue's settings; with options, change those first (a value of none clears one)")
  .argument('<queue>')
  .option('--lease-ms <ms>', 'lease of a claim that names none')
  .option('--max-attempts <n>', 'attempts before a job fails for good')
  .option('--max-running <n>', 'most jobs running at once, across all workers')
  .option('--rate <n>', 'most claims handed out per second')
  .option('--backoff <spec>', 'delay before a retry: INITIAL_MS[,FACTOR[,MAX_MS[,JITTER]]]')
  .option('--dead-letter-queue <queue>', 'where a job that fails for good is also submitted')
  .option('--ttl-ms <ms>', 'a submit without a TTL fails as Expired if not claimed within this')
  .option('--retention-ms <ms>', 'how long finished jobs are kept before they are purged (default 7 days)')
  .option('--journal-retention-ms <ms>', "how long a finished job's frames are kept, when less than the job itself (none: as long)")
  .option('--time-limit-ms <ms>', "the time limit of the queue's jobs that name none (default: the worker's, 600 s)")
  .option('--push-url <url>', 'push delivery: POST each job to this URL, signed (none: workers pull); admin only')
  .option('--push-concurrency <n>', 'push delivery: most deliveries at once (default 8)')
  .option('--push-timeout-ms <ms>', 'push delivery: how long one delivery may take (default 30000)')
  .option('--push-batch-size <n>', 'push delivery: most jobs in one delivery, above 1 a lakeshore.batch (default 1)')
  .option('--rotate-push-secret', 'push delivery: a new signing secret (the old one signs too for 24 h)')
  .action((queue: string, o: op.QueueFlags) => run((g) => op.queue(planeOf(g), output(!!g.json), queue, o))());

program
  .command('schedule')
  .description('cron schedules of a queue: each tick submits FN(ARGS)')
  .argument('<action>', 'set | list | rm')
  .argument('<queue>')
  .argument('[name]', 'schedule name (set, rm)')
  .option('--cron <expr>', 'cron expression: 5 fields (minute first) or 6 (seconds first)')
  .option('--tz <zone>', 'IANA time zone the expression is read in (default UTC)')
  .option('--fn <name>', 'function to submit at each tick')
  .option('--args <json>', 'JSON array of its arguments')
  .option('--kwargs <json>', 'JSON object of its keyword arguments')
  .option('--priority <n>', "priority of each tick's job")
  .action(
    (
      action: string,
      queue: string,
      name: string | undefined,
      o: { cron?: string; tz?: string; fn?: string; args?: string; kwargs?: string; priority?: string },
    ) => run((g) => op.schedule(planeOf(g), output(!!g.json), action, queue, name, o))(),
  );

program
  .command('ls')
  .description("a page of a queue's jobs in one state (claim order for queued, newest first for finished ones)")
  .argument('<queue>')
  .option('--state <state>', 'delayed | queued | running | succeeded | failed | cancelled', 'queued')
  .option('--limit <n>', 'jobs per page (1-1000)', '50')
  .option('--cursor <cursor>', 'the next page, from the previous one')
  .action((queue: string, o: { state: string; limit?: string; cursor?: string }) =>
    run((g) => op.ls(planeOf(g), output(!!g.json), queue, o))(),
  );

program
  .command('get')
  .description('show an invocation; several ids show a line each')
  .argument('<ids...>')
  .action((ids: string[]) =>
    run((g) =>
      ids.length === 1 ? cmd.get(planeOf(g), output(!!g.json), ids[0] as string) : op.getMany(planeOf(g), output(!!g.json), ids),
    )(),
  );

program
  .command('result')
  .description('wait for invocations to end and print their results; several ids print each as it ends')
  .argument('<ids...>')
  .option('--timeout <seconds>', 'give up after this long (0: wait forever)', '0')
  .action((ids: string[], o: { timeout: string }) =>
    run((g) =>
      ids.length === 1
        ? cmd.result(planeOf(g), output(!!g.json), ids[0] as string, seconds('--timeout', o.timeout))
        : cmd.results(planeOf(g), output(!!g.json), ids, seconds('--timeout', o.timeout)),
    )(),
  );

program
  .command('tail')
  .description("print an invocation's frames as they are written; resumes by itself after a dropped connection")
  .argument('<id>')
  .option('--since <seq>', 'start after this seq', '-1')
  .action((id: string, o: { since: string }) => run((g) => cmd.tail(planeOf(g), output(!!g.json), id, integer('--since', o.since, -1)))());

program
  .command('cancel')
  .description('cancel a delayed, queued or running invocation')
  .argument('<id>')
  .action((id: string) => run((g) => cmd.cancel(planeOf(g), output(!!g.json), id))());

program
  .command('delete')
  .description('delete a finished (succeeded, failed or cancelled) invocation and its frames; cancel one first')
  .argument('<id>')
  .action((id: string) => run((g) => op.del(planeOf(g), output(!!g.json), id))());

program
  .command('purge')
  .description("delete a queue's finished jobs of a state, with their frames, after a confirmation (an admin token's)")
  .argument('<queue>')
  .requiredOption('--state <state>', 'succeeded, failed, cancelled, or finished (all three)')
  .option('--yes', 'do not ask (needed where stdin is not a terminal)')
  .action((queue: string, o: { state: string; yes?: boolean }) => run((g) => op.purge(planeOf(g), output(!!g.json), queue, o, confirm))());

program
  .command('workers')
  .description('the workers heard from lately: their queues, what each holds, when each was last heard')
  .action(() => run((g) => watch.workers(planeOf(g), output(!!g.json)))());

program
  .command('push')
  .description("a local plane's push delivery: POST its queues' jobs to their push targets, until Ctrl-C")
  .argument('[queues...]', 'queues (default: every queue with a push target, looked for each second)')
  .action((queues: string[]) => run((g) => pushCmd(planeOf(g), output(!!g.json), queues))());

program
  .command('events')
  .description("a queue's lifecycle feed, or the namespace's, live: one line per record until Ctrl-C")
  .argument('[queue]', 'one queue (default: every queue of the namespace)')
  .option('--count <n>', 'exit after this many records')
  .action((queue: string | undefined, o: { count?: string }) => {
    if (o.count !== undefined && !(Number.isInteger(Number(o.count)) && Number(o.count) > 0))
      throw new cmd.UsageError(`--count takes a positive integer, got ${JSON.stringify(o.count)}`);
    return run((g) => watch.events(planeOf(g), output(!!g.json), queue ?? null, o))();
  });

program
  .command('stats')
  .description('counts by state, per queue')
  .argument('[queues...]', 'queues (default: all)')
  .option('--watch', 'refresh until Ctrl-C')
  .option('--interval <seconds>', 'refresh period with --watch', '2')
  .action((queues: string[], o: { watch?: boolean; interval: string }) =>
    run((g) => cmd.stats(planeOf(g), output(!!g.json), queues, !!o.watch, positiveSeconds('--interval', o.interval)))(),
  );

program
  .command('token')
  .description('create, list or revoke namespace-scoped tokens (edge plane; needs an admin token)')
  .argument('<action>', 'create | list | revoke')
  .argument('[id]', 'token id (revoke)')
  .option('--role <role>', 'producer | worker | admin (create)')
  .addOption(
    new Option('--pool <pool>', 'limit a worker token to this pool (repeatable)').argParser((v: string, prev: string[] = []) => [
      ...prev,
      v,
    ]),
  )
  .option('--name <name>', 'a label (create)')
  .option('--rps <n>', "this token's requests per second (create; default: the plane's)")
  .option('--burst <n>', "this token's request burst (create)")
  .option('--streams <n>', "this token's most open journal streams (create)")
  .action(
    (
      action: string,
      id: string | undefined,
      o: { role?: string; pool?: string[]; name?: string; rps?: string; burst?: string; streams?: string },
    ) => run((g) => cmd.token(planeOf(g), output(!!g.json), action, id, o))(),
  );

const admin = program.command('admin').description("the deployment's operator (edge plane; the root token)");
admin
  .command('move-namespace')
  .description("move a namespace's rows to another shard; its writes wait a moment, nothing is lost or repeated")
  .argument('<namespace>')
  .requiredOption('--to <shard>', 'the shard to move it to: a D1 binding (DB, DB_1, ...)')
  .action((namespace: string, o: { to: string }) => run((g) => cmd.moveNamespace(planeOf({ ...g, namespace }), output(!!g.json), o.to))());
admin
  .command('shards')
  .description("each shard's storage against its limit and how many namespaces live on it; with a shard, its namespaces")
  .argument('[shard]', 'a shard (DB, DB_1, ...): list the namespaces on it')
  .action((shard: string | undefined) => run((g) => cmd.shards(planeOf(g), output(!!g.json), shard))());
admin
  .command('move-status')
  .description("where the namespace's move is (the last one, once ended); --wait follows it to its end")
  .argument('<namespace>')
  .option('--wait', 'follow it until it ends')
  .action((namespace: string, o: { wait?: boolean }) =>
    run((g) => cmd.moveStatus(planeOf({ ...g, namespace }), output(!!g.json), !!o.wait))(),
  );

program
  .command('stream-url')
  .description("a browser's URL for an invocation's journal: a read-only stream token for it in the query (edge plane)")
  .argument('<id>')
  .option('--ttl <seconds>', 'how long the token lives (at most 86400)', '900')
  .option('--streams <n>', 'streams the token may hold open at once')
  .action((id: string, o: { ttl: string; streams?: string }) => run((g) => cmd.streamUrl(planeOf(g), output(!!g.json), id, o))());

program
  .command('dev')
  .description('start the local edge plane (its Worker in one workerd, local D1), as npm start does')
  .option('--port <n>', 'port on 127.0.0.1', '8787')
  .option('--wrangler', 'serve it with wrangler dev instead')
  .action((o: { port: string; wrangler?: boolean }) =>
    run(() => cmd.dev(['--port', o.port, ...(o.wrangler ? ['--wrangler'] : [])]), { plane: false })(),
  );

workerCommands(program, run, planeOf);

export async function main(argv: string[]): Promise<number> {
  // A closed pipe (`lakeshore stats --watch | head`) ends the command quietly.
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(EXIT.ok);
  });
  try {
    await program.parseAsync(argv, { from: 'user' });
    return code;
  } catch (e) {
    if (e instanceof CommanderError) return e.exitCode === 0 ? EXIT.ok : EXIT.usage;
    if (e instanceof cmd.UsageError) {
      process.stderr.write(`lakeshore: ${e.message}\n`);
      return EXIT.usage;
    }
    process.stderr.write(`lakeshore: ${e instanceof Error ? e.message : String(e)}\n`);
    if (e instanceof UnavailableError)
      process.stderr.write('lakeshore: is the plane running (npm start)? Are LAKESHORE_URL (or --url) and the port right?\n');
    return exitCodeOf(e);
  }
}

/**
 * Started by bin/lakeshore.mjs on a Node too old to run the CLI itself: once that launcher is gone
 * (this process is given to another parent), it stops as on SIGTERM, once. Killed outright, the
 * launcher passes no signal on, and a worker must not run on as an orphan.
 */
function stopWithLauncher(): void {
  const launcher = process.ppid;
  const watch = setInterval(() => {
    if (process.ppid === launcher) return;
    clearInterval(watch);
    process.kill(process.pid, 'SIGTERM');
  }, 500);
  watch.unref();
}

/** The CLI as the child that bin/lakeshore.mjs starts on an older Node (LAKESHORE_LAUNCHED=1): it exits with the command. */
export async function asLaunched(): Promise<never> {
  if (process.env.LAKESHORE_LAUNCHED === '1') {
    delete process.env.LAKESHORE_LAUNCHED; // not for the processes it starts
    stopWithLauncher();
  }
  process.exit(await main(process.argv.slice(2)));
}

if (import.meta.main) await asLaunched();
