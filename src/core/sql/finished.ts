/**
 * The condition of the finished-jobs index (schema.ts, invocations_finished). A query uses that
 * partial index only if its own WHERE has this very term (SQLite does not infer it from
 * `state = 'failed'`): queries on finished rows repeat it.
 */
export const FINISHED = `state IN ('succeeded', 'failed', 'cancelled')`;
