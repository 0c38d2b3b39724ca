/**
 * How often an observer that redraws (the dashboard's views, `lakeshore stats --watch`) reads the
 * plane: at its own pace, and a redraw that took long waits longer before the next, at least
 * OBSERVER_COST_FACTOR times what it took. A view of thousands of queues reads many pages (100
 * queues a request, each a call of every queue's object), so an open one spends at most about a
 * tenth of its time reading the plane, however large the namespace.
 */
export const OBSERVER_COST_FACTOR = 10;

/** When the next redraw may start, in ms after the last one started: `everyMs`, or more after a long one. */
export const nextRedrawAfter = (everyMs: number, tookMs: number) => Math.max(everyMs, OBSERVER_COST_FACTOR * tookMs);
