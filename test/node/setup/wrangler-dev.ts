/**
 * Starts `wrangler dev` once for the Node-side tests: fresh state in a temp dir, a random token,
 * and three shards (D1 databases DB, DB_1, DB_2), so the suites' fresh namespaces spread across
 * them and every route is seen reaching its namespace's shard. One shard is the special case.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { newToken, startPlane } from '../../../scripts/plane.mjs';

declare module 'vitest' {
  export interface ProvidedContext {
    planeUrl: string;
    planeToken: string;
  }
}

export default async function setup(project: TestProject) {
  const dir = mkdtempSync(join(tmpdir(), 'lakeshore-test-'));
  const token: string = newToken('lsk_test_');
  const plane = await startPlane({
    node: process.execPath,
    env: process.env,
    persistTo: dir,
    // A move copies as slowly as a large one would, and takes many steps (test/node/move.test.ts).
    vars: { LAKESHORE_TOKEN: token, SIMULATED_MOVE_PAUSE_MS: '500', MOVE_STEP_SUBREQUESTS: '40' },
    server: 'wrangler',
    shards: 3,
  });
  project.provide('planeUrl', plane.url);
  project.provide('planeToken', token);
  return async () => {
    await plane.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}
