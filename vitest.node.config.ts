// Node-side tests: the clients against a real `wrangler dev`, started fresh on a free loopback port.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/node/**/*.test.ts', 'test/conformance/**/*.test.ts', 'test/model/**/*.test.ts', 'test/fault/**/*.test.ts'],
    exclude: ['test/fault/crash.test.ts', 'test/fault/outage.test.ts'], // alone, in vitest.crash.config.ts
    globalSetup: ['test/node/setup/wrangler-dev.ts'],
    // Two files at a time: most of these wait on other processes (the plane, CLIs, workers), and
    // vitest's default on two cores is one. Tests that time anything bound it by an observable
    // condition, not by the machine being idle.
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
