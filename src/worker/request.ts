/** A request's life beyond its handler. */
import type { Ctx } from './plane.ts';

/**
 * Work that must finish although the request that started it may be over (its client gone): kept
 * alive past the response with waitUntil, its failure ignored.
 */
export const later = (c: Ctx, p: Promise<unknown>) => c.executionCtx.waitUntil(p.catch(() => {}));
