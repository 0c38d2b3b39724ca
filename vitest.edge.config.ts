// Tests that run inside workerd (the real runtime) against local D1 and Durable Objects.
import { cloudflareTest, readD1Migrations } from '@cloudflare/vitest-plugin';
import { defineConfig } from 'vitest/config';

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
          },
        },
      }),
    ],
    test: {
      include: ['test/edge/**/*.test.ts'],
      setupFiles: ['test/edge/setup/apply-migrations.ts'],
    },
  };
});
