/**
 * The envelope both clients write (docs/envelope.md): a field that is null is left out, since the
 * row keeps the envelope's bytes for the job's whole retention, and a reader takes it missing as
 * null. Node and Python write the same bytes for the same call.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { decodeEnvelope, encodeEnvelope } from '../../client/envelope.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const TP = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const text = (b: Uint8Array) => new TextDecoder().decode(b);

describe('the envelope', () => {
  it('leaves out each field that is null, and reads one left out as null', () => {
    const plain = encodeEnvelope({ fn: 'count', args: [2], traceparent: TP, origin: null, time_limit_ms: undefined });
    expect(text(plain)).toBe(`{"v":1,"fn":"count","args":[2],"kwargs":{},"traceparent":"${TP}"}`);
    expect(decodeEnvelope(plain)).toEqual({
      v: 1,
      fn: 'count',
      args: [2],
      kwargs: {},
      module: null,
      traceparent: TP,
      origin: null,
      time_limit_ms: null,
      max_retries: null,
      code: null,
    });
    const full = { module: 'pkg.mod:count', origin: 'o-1', time_limit_ms: 5_000, max_retries: 2, code: 'a'.repeat(40) };
    expect(decodeEnvelope(encodeEnvelope({ fn: 'count', args: [], kwargs: { lr: 0.1 }, traceparent: TP, ...full }))).toEqual({
      v: 1,
      fn: 'count',
      args: [],
      kwargs: { lr: 0.1 },
      traceparent: TP,
      ...full,
    });
  });

  it('is written byte for byte the same by the Python client', () => {
    const py = spawnSync(
      'python3',
      [
        '-c',
        'import sys; from lakeshore import encode_envelope as e; ' +
          `sys.stdout.write(e("count", [2], traceparent="${TP}").decode() + "\\n" + ` +
          `e("f", [float("nan")], {"lr": 0.1}, module="m:f", traceparent="${TP}", origin="o", time_limit_ms=5, max_retries=1).decode())`,
      ],
      { env: { ...process.env, PYTHONPATH: join(ROOT, 'client', 'python') }, encoding: 'utf8' },
    );
    expect(py.status, py.stderr).toBe(0);
    const [plain, full] = py.stdout.split('\n');
    expect(plain).toBe(text(encodeEnvelope({ fn: 'count', args: [2], traceparent: TP })));
    expect(full).toBe(
      text(
        encodeEnvelope({
          fn: 'f',
          args: [Number.NaN],
          kwargs: { lr: 0.1 },
          module: 'm:f',
          traceparent: TP,
          origin: 'o',
          time_limit_ms: 5,
          max_retries: 1,
        }),
      ),
    );
  });
});
