// The crash tests (test/fault/crash.test.ts, outage.test.ts) on their own: they kill and restart a plane and
// worker processes with 1 s leases, and measure redelivery, so they run alone, not beside the
// other suites' load. The plane they kill is their own (scripts/serve.mjs), so no global setup.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/fault/crash.test.ts', 'test/fault/outage.test.ts'],
    // One file at a time: each stops its plane and starts it again on the same port, and a port
    // left free meanwhile can be handed to the other file's plane (seen: a restart refused).
    fileParallelism: false,
    testTimeout: 600_000,
    hookTimeout: 120_000,
  },
});
