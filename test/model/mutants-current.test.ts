/**
 * The guard mutants of test/mutants.json (`npm run mutants`, run by `npm run fault`, not by CI)
 * still break the code as it is. A mutant edits an exact piece of source; once that code is
 * reworded, the mutant no longer applies and its guard goes unproven while every run stays green.
 * That happened to the fencing guard's three mutants: this fast check fails the day it does. It also
 * holds the README's Guarantees table to the list: each mutant named beside its promise.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');

interface Mutant {
  id: string;
  file: string;
  edits: { find: string; replace: string }[];
  tests?: string[];
}

const { mutants } = JSON.parse(readFileSync(join(ROOT, 'test', 'mutants.json'), 'utf8')) as { mutants: Mutant[] };

describe('test/mutants.json', () => {
  it('lists the guards (else the check below says nothing)', () => {
    expect(mutants.length).toBeGreaterThan(30);
    expect(new Set(mutants.map((m) => m.id)).size, 'ids are unique').toBe(mutants.length);
  });

  it('each mutant finds its code once in its file, and names tests that exist', () => {
    const stale: string[] = [];
    for (const m of mutants) {
      const file = join(ROOT, m.file);
      if (!existsSync(file)) {
        stale.push(`${m.id}: ${m.file} does not exist`);
        continue;
      }
      const source = readFileSync(file, 'utf8');
      for (const e of m.edits) {
        const n = source.split(e.find).length - 1;
        if (n !== 1) stale.push(`${m.id}: ${JSON.stringify(e.find)} occurs ${n} times in ${m.file}`);
        if (e.find === e.replace) stale.push(`${m.id}: an edit that changes nothing`);
      }
      // A Python test is named with its case: client/python/tests/test_x.py:Class[.method].
      for (const t of m.tests ?? []) if (!existsSync(join(ROOT, t.split(':')[0]!))) stale.push(`${m.id}: its test ${t} does not exist`);
    }
    expect(stale).toEqual([]);
  });

  it("each mutant is named in the README's Guarantees table, beside the promise it breaks", () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const table = readme.slice(readme.indexOf('## Guarantees'), readme.indexOf('\n## ', readme.indexOf('## Guarantees') + 1));
    // The last cell of each row: the tests that fail, each with its mutants in parentheses.
    const lastCells = table.split('\n').flatMap((row) => (row.startsWith('| ') ? [row.split(' | ').at(-1)!] : []));
    const named = new Set(lastCells.flatMap((cell) => [...cell.matchAll(/\(([a-z0-9, -]+)\)/g)].flatMap((m) => m[1]!.split(', '))));
    expect(mutants.filter((m) => !named.has(m.id)).map((m) => m.id)).toEqual([]);
  });
});
