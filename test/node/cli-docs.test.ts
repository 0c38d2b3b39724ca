/**
 * docs/cli.md against the CLI's own definitions (client/cli/main.ts): every command has a row, each
 * row names every flag of its command, and no row names a command or flag that does not exist. So
 * the reference cannot drift from `--help` again.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { program } from '../../client/cli/main.ts';

const DOC = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'cli.md'), 'utf8');
/** The first cell of each table row: the commands as a user types them. */
const rows = DOC.split('\n')
  .filter((l) => l.startsWith('| `lakeshore '))
  .map((l) => l.split(/(?<!\\)\|/)[1]!.trim());

/** Every command a user runs: leaves of the tree, by their path (`worker start`, `admin move-namespace`). */
function leaves(c: Command, path: string[] = []): { path: string; cmd: Command }[] {
  return c.commands
    .filter((s) => s.name() !== 'help')
    .flatMap((s) => (s.commands.length ? leaves(s, [...path, s.name()]) : [{ path: [...path, s.name()].join(' '), cmd: s }]));
}
const LEAVES = leaves(program);
/** The commands a cell's `lakeshore ...` spans name: words up to the first argument or flag. */
const named = (cell: string) =>
  [...cell.matchAll(/`lakeshore ([^`]*)`/g)].map((m) => {
    const words = m[1]!.split(' ');
    const cut = words.findIndex((w) => !/^[a-z][a-z-]*$/.test(w));
    return words.slice(0, cut < 0 ? words.length : cut);
  });
const rowsOf = (path: string) => rows.filter((r) => named(r).some((w) => w.join(' ') === path || w.join(' ').startsWith(`${path} `)));

describe('docs/cli.md', () => {
  it('has a row for every command, naming each of its flags', () => {
    const missing: string[] = [];
    for (const { path, cmd } of LEAVES) {
      const mine = rowsOf(path);
      if (!mine.length) {
        missing.push(`no row for \`lakeshore ${path}\``);
        continue;
      }
      // A row that stands for another command's flags ("the flags of `worker start`") is checked against that one's.
      const ref = DOC.split('\n')
        .find((l) => l.startsWith(`| \`lakeshore ${path} `))
        ?.match(/the flags of `(?:lakeshore )?([^`]+)`/)?.[1];
      const text = (ref ? rowsOf(ref) : mine).join(' ');
      for (const o of cmd.options)
        if (o.long && !new RegExp(`${o.long}(?![\\w-])`).test(text)) missing.push(`\`lakeshore ${path}\` lacks ${o.long}`);
    }
    expect(missing).toEqual([]);
  });

  it('names no command or flag the CLI does not have', () => {
    const paths = new Set(LEAVES.map((l) => l.path));
    const flags = new Set([...LEAVES.flatMap((l) => l.cmd.options.map((o) => o.long)), ...program.options.map((o) => o.long)]);
    const unknown: string[] = [];
    for (const cell of rows) {
      for (const words of named(cell)) {
        // The longest known path the words start with (`schedule set`: `schedule`, whose action is an argument).
        const hit = words.map((_, i) => words.slice(0, i + 1).join(' ')).filter((p) => paths.has(p));
        if (!hit.length) unknown.push(`\`lakeshore ${words.join(' ')}\``);
      }
      for (const f of cell.match(/--[a-z][a-z-]*/g) ?? []) if (!flags.has(f)) unknown.push(f);
    }
    expect(unknown).toEqual([]);
  });

  it('names every global flag', () => {
    for (const o of program.options) expect(DOC).toContain(o.long!);
  });
});
