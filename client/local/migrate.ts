/**
 * Applies the plane's SQL migrations (the same files D1 gets) to a local SQLite database, once
 * each, inside one write transaction so two processes opening a new file do not race.
 */
import type { DatabaseSync } from 'node:sqlite';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The nearest `migrations/` above this module: the repository's, or the one the npm package ships. */
function migrationsDir(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'migrations', '0000_init.sql'))) return join(dir, 'migrations');
    if (dirname(dir) === dir)
      throw new Error(`the SQL migrations are missing: no migrations/ directory above ${fileURLToPath(import.meta.url)}`);
  }
}

export const MIGRATIONS_DIR = migrationsDir();

export function migrate(db: DatabaseSync, dir = MIGRATIONS_DIR): void {
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.sql'))
    .sort();
  db.exec('BEGIN IMMEDIATE');
  try {
    db.exec(
      `CREATE TABLE IF NOT EXISTS d1_migrations (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE, applied_at TEXT DEFAULT CURRENT_TIMESTAMP NOT NULL)`,
    );
    const done = new Set((db.prepare('SELECT name FROM d1_migrations').all() as { name: string }[]).map((r) => r.name));
    for (const f of files) {
      if (done.has(f)) continue;
      db.exec(readFileSync(join(dir, f), 'utf8'));
      db.prepare('INSERT INTO d1_migrations (name) VALUES (?)').run(f);
    }
    db.exec('COMMIT');
  } catch (e) {
    db.exec('ROLLBACK');
    throw e;
  }
}
