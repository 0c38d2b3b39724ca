/**
 * Journal frames. A frame is `[kind, seq, body, meta]`; its byte form ("frame bytes") is the UTF-8
 * JSON array `[kind, seq, "<base64 body>", meta]`, which any language can produce with its
 * standard library. The plane stores kind, body and meta as columns and never decodes the body.
 */
import { fromBase64, fromUtf8, toBase64, utf8 } from './bytes.ts';
import { badRequest } from './errors.ts';

export const FrameKind = Object.freeze({ VALUE: 0, CHUNK: 1, BEGIN: 2, END: 3, ERROR: 4 } as const);
export type FrameKind = (typeof FrameKind)[keyof typeof FrameKind];

export interface Frame {
  kind: FrameKind;
  seq: number;
  body: Uint8Array;
  meta: Record<string, unknown> | null;
}

/** A frame as stored and read back: which attempt wrote it and whether it ends the stream. */
export interface JournalFrame extends Frame {
  attempt: number;
  final: boolean;
}

export const FRAME_KIND_NAMES: Readonly<Record<FrameKind, string>> = Object.freeze({
  0: 'VALUE',
  1: 'CHUNK',
  2: 'BEGIN',
  3: 'END',
  4: 'ERROR',
});

export const isFrameKind = (k: unknown): k is FrameKind => typeof k === 'number' && Number.isInteger(k) && k >= 0 && k <= 4;

/** END and ERROR end a stream, unless the writer marks an ERROR non-final because it will retry. */
export const isTerminalKind = (k: FrameKind): boolean => k === FrameKind.END || k === FrameKind.ERROR;

export function encodeFrame(f: Frame): Uint8Array {
  return utf8(JSON.stringify([f.kind, f.seq, toBase64(f.body), f.meta ?? null]));
}

export function decodeFrame(bytes: Uint8Array): Frame {
  let v: unknown;
  try {
    v = JSON.parse(fromUtf8(bytes));
  } catch {
    throw badRequest('frame bytes are not a JSON array [kind, seq, body_base64, meta]');
  }
  if (!Array.isArray(v) || v.length < 3 || v.length > 4) throw badRequest('a frame is [kind, seq, body_base64, meta]');
  const [kind, seq, body, meta] = v as unknown[];
  if (!isFrameKind(kind)) throw badRequest(`unknown frame kind ${JSON.stringify(kind)}: expected 0..4`);
  if (!(typeof seq === 'number' && Number.isInteger(seq) && seq >= -1)) throw badRequest('frame seq must be an integer >= -1');
  const bodyBytes = typeof body === 'string' ? fromBase64(body) : null;
  if (!bodyBytes) throw badRequest('frame body must be base64');
  if (meta !== undefined && meta !== null && (typeof meta !== 'object' || Array.isArray(meta)))
    throw badRequest('frame meta must be an object or null');
  return { kind, seq, body: bodyBytes, meta: (meta as Record<string, unknown> | null | undefined) ?? null };
}
