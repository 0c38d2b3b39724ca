/**
 * Cron expressions of schedules. Every plane reads the same language: croner here, croniter on
 * the Python local plane (client/python/lakeshore/cron.py). The two libraries accept more than
 * they agree on (croner's year field, `W`, `+`; croniter's seconds-last and hash forms), so an
 * expression is first checked against the portable part, the same pattern on both planes (the
 * Python plane loads CRON_SYNTAX from sql.json), then handed to the library; what the libraries
 * compute from it is compared in test/node/cron-parity.test.ts.
 *
 * The portable part: 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first);
 * in each, comma-separated items of `*`, a number or a three-letter name, a range `a-b`, each with
 * an optional `/step`; day-of-month may be `L` (its last day), day-of-week an `n#k` (the k-th
 * such weekday of the month); or one of the nicknames.
 */
import { Cron } from 'croner';
import { badRequest } from './errors.ts';

const VALUE = '(?:\\d{1,2}|[A-Za-z]{3})';
// A step goes on `*` or on a range (croner refuses `5/15`, croniter reads it as `5-59/15`).
const ITEM = `(?:\\*(?:/\\d{1,2})?|${VALUE}(?:-${VALUE}(?:/\\d{1,2})?)?)`;
const list = (item: string) => `^(?:${item})(?:,(?:${item}))*$`;

/** The portable cron language as regular expressions (JavaScript and Python read them alike). */
export const CRON_SYNTAX = {
  field: list(ITEM),
  day_of_month: list(`${ITEM}|L`),
  day_of_week: list(`${ITEM}|${VALUE}#[1-5]`),
  /** A time zone is a name (V8 also reads offsets such as "+01:00", which Python's zoneinfo refuses). */
  timezone: '^[A-Za-z][A-Za-z0-9_+\\-/]*$',
  nicknames: ['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@hourly'],
} as const;

const FIELD = new RegExp(CRON_SYNTAX.field);
const DOM = new RegExp(CRON_SYNTAX.day_of_month);
const DOW = new RegExp(CRON_SYNTAX.day_of_week);
const ZONE = new RegExp(CRON_SYNTAX.timezone);

/** Why `expr` is outside the portable language, or null when it is inside. */
export function cronSyntaxError(expr: string): string | null {
  const t = expr.trim();
  if ((CRON_SYNTAX.nicknames as readonly string[]).includes(t.toLowerCase())) return null;
  const f = t.split(/\s+/);
  if (f.length !== 5 && f.length !== 6) return `expected 5 fields (minute first) or 6 (seconds first), got ${f.length}`;
  const bad = f.findIndex((x, i) => !(i === f.length - 3 ? DOM : i === f.length - 1 ? DOW : FIELD).test(x));
  if (bad >= 0)
    return `field ${bad + 1} (${JSON.stringify(f[bad])}) is not made of *, numbers, names, ranges, steps${bad === f.length - 3 ? ' or L' : bad === f.length - 1 ? ' or n#k' : ''}`;
  return null;
}

/** An IANA time zone name, canonical ("europe/berlin" is "Europe/Berlin"); an unknown one is a 400. */
export function zoneOf(timezone: string): string {
  const unknown = () => badRequest(`unknown time zone ${JSON.stringify(timezone)}: expected an IANA name such as "Europe/Berlin"`);
  if (!ZONE.test(timezone)) throw unknown();
  try {
    return new Intl.DateTimeFormat('en', { timeZone: timezone }).resolvedOptions().timeZone;
  } catch {
    throw unknown();
  }
}

/** A cron expression read in `timezone` (canonical IANA, see zoneOf; null: UTC); a bad one is a 400 naming what is wrong. */
export function cronOf(expr: unknown, timezone: string | null): Cron {
  if (typeof expr !== 'string' || !expr.trim()) throw badRequest('cron must be a cron expression, e.g. "*/5 * * * *"');
  const why = cronSyntaxError(expr);
  if (why) throw badRequest(`cron ${JSON.stringify(expr)} is not valid: ${why}`);
  try {
    return new Cron(expr.trim(), { paused: true, mode: '5-or-6-parts', ...(timezone ? { timezone } : {}) });
  } catch (e) {
    throw badRequest(`cron ${JSON.stringify(expr)} is not valid: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/**
 * A stored expression, for firing: read by croner as it was when it was set (an expression set
 * before the portable check existed still fires on the Node planes); null when croner cannot.
 */
export function storedCron(expr: string, timezone: string | null): Cron | null {
  try {
    return new Cron(expr.trim(), { paused: true, ...(timezone ? { timezone } : {}) });
  } catch {
    return null;
  }
}
