/**
 * One attempt budget for nacks and lease expiry alike: a row may be claimed `max_attempts` times
 * (its queue's setting, else the plane's default). Once the last attempt fails, the row fails for
 * good with `error.type = "AttemptsExhausted"`, carrying the last attempt's own error as `last`.
 */

/** SQL: the budget of the row `t` (a table name or alias); `dflt` is the plane default's parameter. */
export const budget = (t: string, dflt: string) =>
  `COALESCE((SELECT max_attempts FROM queues q WHERE q.ns = ${t}.ns AND q.queue = ${t}.queue), ${dflt})`;

/** SQL: the error of a row whose last attempt failed with the JSON error `last`. */
export const exhausted = (last: string, attempt: string, max: string) =>
  `json_object('type', 'AttemptsExhausted',
               'message', json_extract(${last}, '$.message') || ' (attempt ' || ${attempt} || ' of ' || ${max} || ', none left)',
               'attempts', ${attempt}, 'last', json(${last}))`;
