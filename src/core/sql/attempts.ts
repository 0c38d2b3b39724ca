/**
 * One attempt budget for nacks and lease expiry alike: a row may be claimed `max_attempts` times
 * (its own setting, else its queue's, else the plane's default), counted since its last explicit
 * retry (`budget_from`). Once the last attempt fails, the row fails for good with
 * `error.type = "AttemptsExhausted"`, carrying the last attempt's own error as `last`. An attempt
 * that fails with attempts left waits its queue's backoff (if any) before it may be claimed again.
 */

/** SQL: the budget of the row `t` (a table alias); `dflt` is the plane default's parameter. */
export const budget = (t: string, dflt: string) =>
  `COALESCE(${t}.max_attempts, (SELECT max_attempts FROM queues q WHERE q.ns = ${t}.ns AND q.queue = ${t}.queue), ${dflt})`;

/** SQL: the attempts the row `t` has spent against its budget. */
export const spent = (t: string) => `(${t}.attempt - ${t}.budget_from)`;

/**
 * SQL: the delay a stored backoff `b` (JSON `{delays: [ms per attempt], jitter}`, as
 * `backoffInput` writes it) gives the `n`th attempt's retry: its delay for that attempt (past the
 * last one it repeats), spread by the jitter at random; NULL when `b` is NULL.
 */
const delayOf = (b: string, n: string) =>
  `CAST(json_extract(${b}, '$.delays[' || (min(${n}, json_array_length(${b}, '$.delays')) - 1) || ']')
        * (1 + json_extract(${b}, '$.jitter') * ((abs(random()) % 2000001) / 1000000.0 - 1)) AS INTEGER)`;

/**
 * SQL: the backoff before the row `t`'s next attempt, in ms: its queue's (the delays are worked
 * out when the setting is made), else the one the stored backoff `fallback` gives (an SQL
 * parameter, NULL for none: the default a nack may bring, nack.ts), else 0. Evaluate it once per
 * row (in a MATERIALIZED CTE): it draws a random number.
 */
export const backoff = (t: string, fallback?: string) =>
  `COALESCE((SELECT ${delayOf('q.backoff', spent(t))}
               FROM queues q WHERE q.ns = ${t}.ns AND q.queue = ${t}.queue AND q.backoff IS NOT NULL),
            ${fallback ? `${delayOf(fallback, spent(t))}, ` : ''}0)`;

/**
 * SQL: the error of a row whose last attempt failed with the JSON error `last`: `spent` of its
 * budget `max` used, the row's own attempt number `attempt` (higher than `spent` after a retry).
 * Integers in the message whatever their storage class (a budget bound from JavaScript comes as a
 * REAL on D1: "3 of 3.0" otherwise). "boom (attempt 3 of 3, none left)"; after a retry, "boom
 * (attempt 4, the 2nd of 2 since its retry, none left)".
 */
export const exhausted = (last: string, spent: string, max: string, attempt: string) => {
  const [n, m, a] = [spent, max, attempt].map((x) => `CAST(${x} AS INTEGER)`);
  const nth = `${n} || CASE WHEN ${n} % 100 IN (11, 12, 13) THEN 'th' WHEN ${n} % 10 = 1 THEN 'st' WHEN ${n} % 10 = 2 THEN 'nd' WHEN ${n} % 10 = 3 THEN 'rd' ELSE 'th' END`;
  return `json_object('type', 'AttemptsExhausted',
               'message', json_extract(${last}, '$.message') || ' (attempt ' ||
                 CASE WHEN ${a} = ${n} THEN ${n} || ' of ' || ${m} ELSE ${a} || ', the ' || ${nth} || ' of ' || ${m} || ' since its retry' END || ', none left)',
               'attempts', ${n}, 'last', json(${last}))`;
};
