/**
 * A table's rows as a copy moves them between databases (copy.ts): its columns read from the
 * databases themselves (`pragma_table_info`), those both have, so a new column is copied without a
 * change here; each row's values bound as they were stored (an envelope or result stored as text
 * stays text, a blob a blob).
 */
import type { Metered, Stmt } from './metered.ts';

export interface Columns {
  names: string[];
  blobs: Set<string>;
}

/** The columns of `table` that both databases have (but `skip`), and which of them hold blobs. */
export async function columnsOf(from: Metered, to: Metered, table: string, skip: string[]): Promise<Columns> {
  const info = (db: Metered) => db.all<{ name: string; type: string }>(`SELECT name, type FROM pragma_table_info(?1)`, table);
  const [a, b] = await Promise.all([info(from), info(to)]);
  const there = new Set(b.map((c) => c.name));
  const cols = a.filter((c) => there.has(c.name) && !skip.includes(c.name));
  return { names: cols.map((c) => c.name), blobs: new Set(cols.filter((c) => /BLOB/i.test(c.type)).map((c) => c.name)) };
}

/** SELECT list: every column, and for a blob column its storage type as `<name>__t`. */
export const selectList = (c: Columns, t: string) =>
  c.names.map((n) => (c.blobs.has(n) ? `${t}${n}, typeof(${t}${n}) AS ${n}__t` : `${t}${n}`)).join(', ');

/** A row's value of column `n` ready to bind: a blob as bytes, text as text, as it was stored. */
function bindable(c: Columns, row: Record<string, unknown>, n: string): { v: unknown; bytes: number } {
  const v = row[n];
  if (v === null || v === undefined) return { v: null, bytes: 0 };
  if (c.blobs.has(n) && row[`${n}__t`] === 'blob') {
    const b = v instanceof ArrayBuffer ? new Uint8Array(v) : Uint8Array.from(v as number[]);
    return { v: b, bytes: b.length };
  }
  return { v, bytes: typeof v === 'string' ? v.length : 8 };
}

/** A value given as SQL rather than bound. */
export class Raw {
  readonly sql: string;
  constructor(sql: string) {
    this.sql = sql;
  }
}

/** The INSERT of `row` into `table`: its columns as they were, but those `override` gives. */
export function insertOf(
  table: string,
  c: Columns,
  row: Record<string, unknown>,
  override: Record<string, unknown>,
  verb: string,
  tail = '',
): Stmt {
  const names = [...Object.keys(override), ...c.names.filter((n) => !(n in override))];
  let bytes = 0;
  const args: unknown[] = [];
  const values = names.map((n) => {
    const o = override[n];
    if (o instanceof Raw) return o.sql;
    if (n in override) args.push(o);
    else {
      const b = bindable(c, row, n);
      bytes += b.bytes;
      args.push(b.v);
    }
    return `?${args.length}`;
  });
  return { sql: `${verb} INTO ${table} (${names.join(', ')}) VALUES (${values.join(', ')}) ${tail}`, args, bytes };
}
