/**
 * One cron language on every plane: the Node planes read expressions with croner
 * (src/core/cron.ts), the Python local plane with croniter (client/python/lakeshore/cron.py). For
 * the same expressions, zones and moments, both must refuse the same expressions and give the
 * same next ticks and the same latest tick, across DST changes (a time that occurs twice, a time
 * that does not exist, a zone that moves by 30 minutes), month ends, a leap day and a year's end.
 */
import { spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cronOf } from '../../src/core/cron.ts';
import { PYTHON } from '../support/python.ts';

const VALID = [
  '* * * * *',
  '*/5 * * * *',
  '0 9 * * *',
  '30 2 * * *',
  '0 2 * * *',
  '30 1,2 * * *',
  '0 1-3 * * *',
  '0 */3 * * *',
  '*/30 * * * *',
  '0 0 L * *',
  '0 0 L 2 *',
  '0 0 * * MON#2',
  '0 9 * * FRI#5',
  '0 12 * * 1-5',
  '15,45 8-18/2 * * *',
  '0 0 1 JAN,JUL *',
  '0 0 * * 7',
  '0 0 * * 0',
  '0 0 * * 5-7',
  '0 0 * * 1-7/2',
  '0 20 1 * MON',
  '0 0 1-7 * SUN',
  '0 0 29 2 *',
  '0 0 31 * *',
  '0 3 * * SUN',
  '@daily',
  '@hourly',
  '@weekly',
  '@monthly',
  '@yearly',
  '*/10 * * * * *',
  '0 30 1 * * *',
  '30 */20 * * * *',
];
const INVALID = [
  'every day',
  '',
  '60 * * * *',
  '* * * *',
  '0 0 * * * * *',
  '0 0 32 * *',
  '0 0 * 13 *',
  '0 0 * * 8',
  'H * * * *',
  '0 0 ? * *',
  '0 0 1W * *',
  '0 0 * * MON#6',
  '0 0 * * MON#0',
  '0 0 * * +MON',
  '1-60 * * * *',
  'abc * * * *',
  '*/0 * * * *',
  '0 0 L * L',
  '0 0 * JAN-XYZ *',
  '5-1 * * * *',
  '0 0 * * FRI-MON',
  '5/15 * * * *',
  '@reboot',
];
const ZONES = [null, 'Europe/Berlin', 'America/New_York', 'Australia/Lord_Howe', 'Asia/Kolkata'];
const MOMENTS = [
  '2026-03-08T06:00:00Z', // New York, an hour before its clocks go forward
  '2026-03-29T00:30:00Z', // Berlin, half an hour before
  '2026-10-25T00:30:00Z', // Berlin, in the hour that occurs twice
  '2026-11-01T05:30:00Z', // New York, in the hour that occurs twice
  '2026-04-04T14:00:00Z', // Lord Howe, before its 30-minute fall back
  '2026-10-03T14:30:00Z', // Lord Howe, at its 30-minute spring forward
  '2028-02-27T12:00:00.500Z',
  '2026-12-31T23:59:59.999Z',
  '2026-06-01T09:00:00Z',
].map((m) => Date.parse(m));

type Row = [string, string | null, 'invalid'] | [string, string | null, number, number[], number | null];

function node(): Row[] {
  const out: Row[] = [];
  for (const e of [...VALID, ...INVALID]) {
    for (const z of ZONES) {
      let c: ReturnType<typeof cronOf>;
      try {
        c = cronOf(e, z);
      } catch {
        out.push([e, z, 'invalid']);
        continue;
      }
      for (const m of MOMENTS) {
        const next: number[] = [];
        for (let t = m, i = 0; i < 4; i++) {
          const n = c.nextRun(new Date(t));
          if (!n) break;
          next.push((t = n.getTime()));
        }
        out.push([e, z, m, next, c.previousRuns(1, new Date(m + 1))[0]?.getTime() ?? null]);
      }
    }
  }
  return out;
}

const PY = `
import json, sys
from lakeshore import cron
from lakeshore.local import SQL
syntax = cron._Syntax(SQL["cron_syntax"])
cases, out = json.load(sys.stdin), []
for e in cases["exprs"]:
    for z in cases["zones"]:
        try:
            c = cron.Cron(syntax, e, z)
        except cron.BadRequest:
            out.append([e, z, "invalid"])
            continue
        for m in cases["moments"]:
            nxt, t = [], m
            for _ in range(4):
                t = c.next_after(t)
                if t is None:
                    break
                nxt.append(t)
            out.append([e, z, m, nxt, c.latest_upto(m)])
print(json.dumps(out))
`;

function python(): Row[] {
  const r = spawnSync(PYTHON, ['-c', PY], {
    input: JSON.stringify({ exprs: [...VALID, ...INVALID], zones: ZONES, moments: MOMENTS }),
    env: { ...process.env, PYTHONPATH: join(resolve(import.meta.dirname, '..', '..'), 'client', 'python') },
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  if (r.status !== 0) throw new Error(`python (${PYTHON}) exited ${r.status}: ${r.stderr}`);
  return JSON.parse(r.stdout) as Row[];
}

describe('one cron language on every plane', () => {
  it('croner and croniter refuse the same expressions and give the same ticks', () => {
    const n = node();
    const p = python();
    const iso = (v: unknown) => (typeof v === 'number' ? new Date(v).toISOString() : v);
    const show = (r: Row | undefined) => r?.map((v) => (Array.isArray(v) ? v.map(iso) : iso(v)));
    const key = (r: Row) => JSON.stringify(r.slice(0, r[2] === 'invalid' ? 2 : 3));
    const py = new Map(p.map((r) => [key(r), r]));
    const differ = n
      .filter((r) => JSON.stringify(py.get(key(r))) !== JSON.stringify(r))
      .map((r) => ({ node: show(r), python: show(py.get(key(r))) }));
    expect(differ.slice(0, 5)).toEqual([]);
    expect(p).toHaveLength(n.length);
    // Both refused every expression of INVALID, on every zone, and none of VALID.
    expect(n.filter((r) => r[2] === 'invalid').length).toBe(INVALID.length * ZONES.length);
  }, 60_000);
});
