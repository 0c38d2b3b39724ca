/**
 * Temporary folders for tests, removed after the test file that made them (whether its tests
 * passed or not), so a run leaves nothing behind in the temp dir.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

const made = new Set<string>();
const removeAll = () => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
  made.clear();
};
// Imported while a test file is collected: the hook belongs to that file.
afterAll(removeAll);
process.once('exit', removeAll);

export function tempDir(prefix = 'lakeshore-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.add(dir);
  return dir;
}
