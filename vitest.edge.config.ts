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
