// The browser tests (test/browser): Debian's Chromium, driven by playwright-core, against a plane
// of their own (scripts/serve.mjs) whose CORS_ORIGINS they set. .ci/run installs chromium with apt
// when it is missing; CHROMIUM_PATH points elsewhere.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/browser/**/*.test.ts'],
    testTimeout: 180_000,
    hookTimeout: 120_000,
  },
});
