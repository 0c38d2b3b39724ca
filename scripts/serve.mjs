// Serves the edge plane's Worker through one Miniflare instance: one workerd process holding the
// Worker, the queue Durable Objects, local D1 and R2, with the bindings and vars of wrangler.toml.
// `wrangler dev` puts a second workerd (a proxy/entry worker) in front of the same Worker; this
// skips it, which is what `npm start` and the benchmark use. State lives where `wrangler dev
// --persist-to DIR` keeps it (DIR/v3), so the two servers share migrations and data.
//
//   node scripts/serve.mjs --port 8787 --persist-to DIR [--var NAME:VALUE ...] [--log-level warn]
//                          [--config FILE]        (a wrangler config other than wrangler.toml: scripts/plane.mjs configFor)
//                          [--inspector-port N]   (DevTools for profiling: ws://127.0.0.1:N/core:user:lakeshore)
//                          [--quiet]              (no `ready` line)
//                          [--exit-with-parent]   (stdin is a pipe from the parent: its end stops this)
//
// Prints `ready <url>` on stdout once it answers. SIGTERM/SIGINT/SIGHUP dispose it, and with
// --exit-with-parent so does the parent's death (its end of stdin closes), so no workerd outlives it.
import { build } from 'esbuild';
import { Log, LogLevel, Miniflare, convertV4MiniflareOptions } from 'miniflare';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { unstable_getMiniflareWorkerOptions } from 'wrangler';
import { ROOT } from './toolchain.mjs';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '8787' },
    config: { type: 'string', default: join(ROOT, 'wrangler.toml') },
    ip: { type: 'string', default: '127.0.0.1' },
    'persist-to': { type: 'string', default: join(ROOT, '.wrangler', 'state') },
    var: { type: 'string', multiple: true, default: [] },
    'log-level': { type: 'string', default: 'warn' },
    'inspector-port': { type: 'string' },
    quiet: { type: 'boolean', default: false },
    'exit-with-parent': { type: 'boolean', default: false },
  },
});

const LEVELS = { none: LogLevel.NONE, error: LogLevel.ERROR, warn: LogLevel.WARN, info: LogLevel.INFO, debug: LogLevel.DEBUG };

/** The Worker bundled as wrangler bundles it: ESM for workerd, `cloudflare:*` left to the runtime. */
async function bundle() {
  const out = await build({
    entryPoints: [join(ROOT, 'src', 'worker', 'index.ts')],
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    conditions: ['workerd', 'worker', 'browser'],
    mainFields: ['module', 'main'],
    external: ['cloudflare:*'],
    write: false,
    logLevel: 'error',
  });
  return out.outputFiles[0].text;
}

const vars = Object.fromEntries(
  values.var.map((kv) => {
    const at = kv.indexOf(':');
    if (at < 1) throw new Error(`--var takes NAME:VALUE, got ${JSON.stringify(kv)}`);
    return [kv.slice(0, at), kv.slice(at + 1)];
  }),
);

// Bindings, vars and compatibility settings come from wrangler.toml, read by wrangler itself.
const { workerOptions: w } = unstable_getMiniflareWorkerOptions(values.config);
// The Worker listens on the port itself (a direct socket), not behind Miniflare's entry worker,
// which would add a hop per request; Miniflare's own entry socket stays on a free port.
const mf = new Miniflare(
  convertV4MiniflareOptions({
    host: values.ip,
    port: 0,
    cf: false,
    inspectorPort: values['inspector-port'] ? Number(values['inspector-port']) : undefined,
    inspectorHost: values['inspector-port'] ? values.ip : undefined,
    log: new Log(LEVELS[values['log-level']] ?? LogLevel.WARN),
    resourcePersistencePath: join(values['persist-to'], 'v3'),
    workers: [
      {
        name: 'lakeshore',
        compatibilityDate: w.compatibilityDate,
        compatibilityFlags: w.compatibilityFlags,
        modules: [{ type: 'ESModule', path: 'worker.js', contents: await bundle() }],
        bindings: { ...w.bindings, ...vars },
        d1Databases: w.d1Databases,
        r2Buckets: w.r2Buckets,
        durableObjects: w.durableObjects,
        unsafeDirectSockets: [{ host: values.ip, port: Number(values.port) }],
      },
    ],
  }),
);
await mf.ready;
if (!values.quiet) process.stdout.write(`ready http://${values.ip}:${values.port}\n`);

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await mf.dispose().catch(() => {});
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.on('SIGHUP', stop);
if (values['exit-with-parent']) {
  process.stdin.on('end', stop);
  process.stdin.on('close', stop);
  process.stdin.resume();
}
