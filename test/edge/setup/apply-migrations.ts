import { applyD1Migrations } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { shardsOf } from '../../../src/durable/directory.ts';

// Every shard gets the migrations. Setup files may run more than once; applyD1Migrations applies only what is missing.
const migrations = (env as unknown as { TEST_MIGRATIONS: Parameters<typeof applyD1Migrations>[1] }).TEST_MIGRATIONS;
for (const s of shardsOf(env)) await applyD1Migrations(s.db, migrations);
