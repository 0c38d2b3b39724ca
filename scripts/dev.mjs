// `npm start`: the local edge plane (local D1 with migrations, the Worker in one workerd via
// scripts/serve.mjs; `npm start -- --wrangler` uses `wrangler dev` instead), URL and token printed.
import { join } from 'node:path';
import { ROOT } from './toolchain.mjs';
import { devToken, startPlane } from './plane.mjs';

const port = Number(process.env.PORT ?? 8787);
const token = devToken();
const persistTo = process.env.LAKESHORE_STATE ?? join(ROOT, '.wrangler', 'state');
const server = process.argv.includes('--wrangler') ? 'wrangler' : 'miniflare';
const plane = await startPlane({ node: process.execPath, env: process.env, port, persistTo, log: 'info', stdio: 'inherit', server });
process.stdout.write(`
  lakeshore edge plane is up (${server === 'wrangler' ? 'wrangler dev' : 'one workerd'}, local D1 in ${persistTo})

    URL    ${plane.url}
    token  ${token}          (from .dev.vars)

  export LAKESHORE_URL=${plane.url} LAKESHORE_TOKEN=${token} LAKESHORE_NAMESPACE=default
  curl -s -H "Authorization: Bearer $LAKESHORE_TOKEN" $LAKESHORE_URL/v1/ns/default/queues/demo/count

  Ctrl-C stops it.
`);
const stop = async () => { await plane.stop(); process.exit(0); };
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
plane.child.on('exit', (code) => process.exit(code ?? 1));
