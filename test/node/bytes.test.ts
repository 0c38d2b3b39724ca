/** The byte codecs in Node 22, which has no Uint8Array base64/hex methods: the fallback loops. */
import { describe } from 'vitest';
import { bytesCases } from '../support/bytes-cases.ts';

describe('bytes in Node', () => bytesCases(false));
