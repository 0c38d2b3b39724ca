// Tests that run inside workerd (the real runtime) against local D1 and Durable Objects.
import { cloudflareTest, readD1Migrations } from '@cloudflare/vitest-plugin';
import { defineConfig } from 'vitest/config';

/**
 * Deliveries the push hooks below hold until the test lets them go (test/edge/push-awake.test.ts):
 * a receiver that takes as long as the test says. Each is let go after a minute at most.
 */
const held = new Map<string, () => void>();

export default defineConfig(async () => {
  const migrations = await readD1Migrations('migrations');
  return {
    plugins: [
      cloudflareTest({
        wrangler: { configPath: './wrangler.toml' },
        miniflare: {
          // Three shards (DB from wrangler.toml, and these two): each test's fresh namespace is
          // placed on one of them, so every route is seen reaching its namespace's shard.
          d1Databases: { DB_1: 'lakeshore-test-shard-1', DB_2: 'lakeshore-test-shard-2' },
          bindings: {
            TEST_MIGRATIONS: migrations,
            LAKESHORE_TOKEN: 'test-token',
            CORS_ORIGINS: 'http://app.test, *',
            FUZZ_N: process.env.FUZZ_N ?? '1500',
            PUSH_SERVICES: 'PUSH_TEST_HOOKS',
            // A move in steps of 24 statements: a namespace of a few hundred jobs takes dozens (test/edge/move.test.ts).
            MOVE_STEP_SUBREQUESTS: '24',
            // A move's check under the fence waits this long first (test/edge/move.test.ts: the undo's window).
            SIMULATED_MOVE_PAUSE_MS: '150',
            // A fenced object's look at the directory (shard-place.ts), often here: the test of it waits for one.
            MOVE_LOOK_MS: '200',
          },
          // A Worker reached by a service binding, as a push target (test/edge/push.test.ts): it
          // answers each delivery with what reached it, which becomes the job's result. Under
          // /hold/KEY it answers only once /release/KEY is asked; /held/KEY says whether it holds one.
          serviceBindings: {
            PUSH_TEST_HOOKS: async (request: Request) => {
              const [, verb, key = ''] = new URL(request.url).pathname.split('/');
              if (verb === 'held') return Response.json({ held: held.has(key) });
              if (verb === 'release') {
                held.get(key)?.();
                return Response.json({ released: held.delete(key) });
              }
              if (verb === 'hold') {
                await new Promise<void>((r) => {
                  const timer = setTimeout(r, 60_000);
                  timer.unref();
                  held.set(key, () => {
                    clearTimeout(timer);
                    r();
                  });
                });
                held.delete(key);
              }
              const body = await request.text();
              const headers = Object.fromEntries(
                ['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((h) => [h, request.headers.get(h)]),
              );
              return Response.json({ url: request.url, method: request.method, headers, body });
            },
          },
        },
      }),
    ],
    test: {
      include: ['test/edge/**/*.test.ts'],
      setupFiles: ['test/edge/setup/apply-migrations.ts'],
      // vitest's default of 5 s is a speed assertion: a test of 12 MB of results took 3.7 s here
      // idle and was cut at 5 s on a busy CI run. The node and fast tiers allow 60 s too.
      testTimeout: 60_000,
    },
  };
});
