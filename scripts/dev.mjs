// `npm start`: the local edge plane (local D1 with migrations, the Worker in one workerd via
// scripts/serve.mjs; `npm start -- --wrangler` uses `wrangler dev` instead), URL and token printed.
//
//   npm start [-- --port N] [-- --wrangler] [-- --shards N]      (PORT=N works too)
//
// --shards N: N local D1 databases (DB, DB_1, ...), namespaces placed across them (default 1).
//
// It checks the port before it prints or starts anything, and brings the plane down with it on
// Ctrl-C, SIGTERM and SIGHUP (a closed terminal); the server also stops if this process dies.
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ROOT } from './toolchain.mjs';
import { devToken, ensurePortFree, startPlane } from './plane.mjs';

const usage = 'usage: npm start [-- --port N] [-- --wrangler] [-- --shards N]\n';
let values;
try {
  ({ values } = parseArgs({
    options: {
      port: { type: 'string' },
      wrangler: { type: 'boolean', default: false },
      shards: { type: 'string', default: '1' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  }));
} catch (e) {
  process.stderr.write(`lakeshore: ${e.message}\n${usage}`);
  process.exit(2);
}
if (values.help) {
  process.stdout.write(usage);
  process.exit(0);
}
const port = Number(values.port ?? process.env.PORT ?? 8787);
if (!Number.isInteger(port) || port < 1 || port > 65535) {
  process.stderr.write(`lakeshore: --port must be a port number (1-65535), got ${JSON.stringify(values.port ?? process.env.PORT)}\n`);
  process.exit(2);
}
const shards = Number(values.shards);
if (!Number.isInteger(shards) || shards < 1 || shards > 64) {
  process.stderr.write(`lakeshore: --shards must be a whole number from 1 to 64, got ${JSON.stringify(values.shards)}\n`);
  process.exit(2);
}
try {
  await ensurePortFree(port);
} catch (e) {
  process.stderr.write(`lakeshore: ${e.message}\n`);
  process.exit(1);
}

const token = devToken();
const persistTo = process.env.LAKESHORE_STATE ?? join(ROOT, '.wrangler', 'state');
const server = values.wrangler ? 'wrangler' : 'miniflare';
let plane;
let stopping = false;
const stop = async (code = 0) => {
  if (stopping) return;
  stopping = true;
  await plane?.stop();
  process.exit(code);
};
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => void stop(0));
// The servers log warnings and errors only: the one URL to use is in the banner below.
const env = { ...process.env, WRANGLER_LOG: process.env.WRANGLER_LOG ?? 'warn' };
plane = await startPlane({ node: process.execPath, env, port, persistTo, log: 'warn', stdio: 'inherit', server, quiet: true, shards });
process.stdout.write(`
  lakeshore edge plane is up (${server === 'wrangler' ? 'wrangler dev' : 'one workerd'}, local D1${shards > 1 ? ` x ${shards} shards` : ''} in ${persistTo})

    URL    ${plane.url}          (open it in a browser: the dashboard)
    token  ${token}          (from .dev.vars)

  export LAKESHORE_URL=${plane.url} LAKESHORE_TOKEN=${token} LAKESHORE_NAMESPACE=default
  curl -s -H "Authorization: Bearer $LAKESHORE_TOKEN" $LAKESHORE_URL/v1/ns/default/queues/demo/count

  Ctrl-C stops it.
`);
plane.child.on('exit', (code) => {
  if (!stopping) {
    process.stderr.write(`lakeshore: the plane stopped (exit ${code ?? 'by signal'})\n`);
    process.exit(code || 1);
  }
});
