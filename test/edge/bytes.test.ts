/** The byte codecs in workerd, where the runtime's own Uint8Array base64/hex methods serve. */
import { describe } from 'vitest';
import { bytesCases } from '../support/bytes-cases.ts';

describe('bytes in workerd', () => bytesCases(true));
