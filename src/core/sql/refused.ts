/**
 * The follow-up of an operator's verb on one invocation (retry, delete) whose guarded statement
 * changed no row: 404 when the id is unknown here, else 409 naming its state and what the verb needs.
 */
import { conflict, invocationNotFound } from '../errors.ts';
import type { Plan } from '../plan.ts';
import { stmt } from '../port.ts';

export const refusedPlan = (verb: string, ns: string, id: string, queue: string | null, needs: string): Plan<never> => ({
  stmts: [stmt(`SELECT state FROM invocations WHERE ns = ?1 AND id = ?2 AND (?3 IS NULL OR queue = ?3)`, ns, id, queue)],
  done: ([r]) => {
    const found = r!.rows[0];
    if (!found) throw invocationNotFound(id);
    throw conflict(`${verb} refused: invocation ${JSON.stringify(id)} is ${String(found.state)}; ${needs}`);
  },
});
