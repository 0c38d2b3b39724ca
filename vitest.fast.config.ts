// The fast tier's Node-side half (`npm run test:fast`): the transition core against its model,
// the conformance suite on the in-memory and Python local planes, the layering check and the
// HTTP client's stream reading. No server is started. The other half is the workerd suite (vitest.edge.config.ts).
import { defineConfig } from 'vitest/config';

export const FAST_NODE = [
  'test/model/**/*.test.ts',
  'test/conformance/memory.test.ts',
  'test/conformance/python.test.ts',
  'test/node/cli-docs.test.ts',
  'test/node/cli-bundle.test.ts',
  'test/node/sse.test.ts',
];

export default defineConfig({
  test: {
    include: FAST_NODE,
    testTimeout: 60_000,
  },
});
