/**
 * The layers of src/ point down: the contract (src/core) imports no runtime and nothing above it;
 * the queue object (src/durable) reaches the contract, never the HTTP layer (src/worker) above it.
 * Read from the import lines of the files themselves.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const SRC = join(ROOT, 'src');

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/** Each file's imports: a package name, a runtime module (`node:`, `cloudflare:`), or the src/ folder a relative path lands in. */
const imports = new Map(
  files(SRC).map((f) => {
    const specs = [...readFileSync(f, 'utf8').matchAll(/(?:^|\n)\s*(?:import|export)[^'"]*?from\s+['"]([^'"]+)['"]/g)].map((m) => m[1]!);
    const targets = specs.map((s) => (s.startsWith('.') ? relative(SRC, resolve(dirname(f), s)).split('/')[0]! : s));
    return [relative(SRC, f), targets] as const;
  }),
);
const layer = (file: string) => file.split('/')[0]!;

describe('src/ layers', () => {
  it('reads every file of src/ (else the checks below say nothing)', () => {
    expect([...imports.keys()].filter((f) => layer(f) === 'core').length).toBeGreaterThan(40);
    expect([...imports.keys()].filter((f) => layer(f) === 'durable').length).toBeGreaterThan(3);
  });

  it('src/core imports no runtime (node:, cloudflare:) and nothing outside src/core', () => {
    const bad = [...imports]
      .filter(([f]) => layer(f) === 'core')
      .flatMap(([f, ts]) =>
        ts.filter((t) => /^(node|cloudflare):/.test(t) || t === 'durable' || t === 'worker').map((t) => `${f} -> ${t}`),
      );
    expect(bad).toEqual([]);
  });

  it('src/durable never imports src/worker (the HTTP layer above it)', () => {
    const bad = [...imports]
      .filter(([f]) => layer(f) === 'durable')
      .flatMap(([f, ts]) => ts.filter((t) => t === 'worker').map((t) => `${f} -> ${t}`));
    expect(bad).toEqual([]);
  });
});
