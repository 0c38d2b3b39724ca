/**
 * The envelope both clients write (docs/envelope.md): a field that is null is left out, since the
 * row keeps the envelope's bytes for the job's whole retention, and a reader takes it missing as
 * null. Node and Python write the same bytes for the same call.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { callText, decodeEnvelope, encodeEnvelope } from '../../client/envelope.ts';
import { errorShown } from '../../client/errors.ts';

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

  it('reads as the call it makes, cut where the reader asks', () => {
    const e = encodeEnvelope({ fn: 'train', args: [{ epochs: 3 }], kwargs: { lr: 0.01, tag: 'x'.repeat(80) }, traceparent: TP });
    expect(callText(e, Number.POSITIVE_INFINITY)).toBe(`train({"epochs":3}, lr=0.01, tag="${'x'.repeat(80)}")`);
    expect(callText(e)).toHaveLength(60);
    expect(callText(e).endsWith('x…)')).toBe(true);
    expect(callText(new Uint8Array([1, 2, 3]))).toBe('(3 bytes, not a call)');
  });
});

describe('an error as a person reads it', () => {
  it('names the error once: not again at the head of a Node stack or the foot of a Python traceback', () => {
    const node = { type: 'ResolveError', message: 'no such fn', stack: 'ResolveError: no such fn\n    at resolve (r.ts:1:1)\n' };
    expect(errorShown(node)).toEqual({ head: 'ResolveError: no such fn', stack: '    at resolve (r.ts:1:1)' });
    const py = {
      type: 'ValueError',
      message: 'bad',
      stack: 'Traceback (most recent call last):\n  File "t.py", line 1\nValueError: bad\n',
    };
    expect(errorShown(py).stack).toBe('Traceback (most recent call last):\n  File "t.py", line 1');
    const qualified = {
      type: 'Unrunnable',
      message: 'm has no f',
      stack: 'Traceback (most recent call last):\n  File "r.py"\nlakeshore.resolve.Unrunnable: m has no f',
    };
    expect(errorShown(qualified).stack).toBe('Traceback (most recent call last):\n  File "r.py"');
    // A budget spent: the head is the wrapper's, the stack the last attempt's, which names its own error.
    const spent = { type: 'AttemptsExhausted', message: 'bad (attempt 2 of 2)', last: { stack: 'Error: bad\n    at f (h.mjs:2:3)' } };
    expect(errorShown(spent).stack).toBe('Error: bad\n    at f (h.mjs:2:3)');
    expect(errorShown({ type: 'E', message: 'm', stack: 'E: m' }).stack).toBe(null);
  });
});
