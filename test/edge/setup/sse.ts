/** Reading a stream's events in tests, with the client's own parser. */
import type { EventSourceMessage } from 'eventsource-parser';
import { sseEvents } from '../../../client/http/sse.ts';

/** Reads events until `stop` says so, then cuts the connection; answers them. */
export async function readEvents(res: Response, stop: (events: EventSourceMessage[]) => boolean): Promise<EventSourceMessage[]> {
  const events: EventSourceMessage[] = [];
  const ac = new AbortController();
  for await (const ev of sseEvents(res.body!, ac.signal)) {
    events.push(ev);
    if (stop(events)) break;
  }
  ac.abort();
  return events;
}

/**
 * A `stop` for readEvents: true once `n` events named `name` have come. It counts each event once,
 * where a predicate that filters or parses the whole list on every event costs the square of it
 * (10,000 records parsed again on each arrival took most of a minute).
 */
export function countReaches(n: number, name = 'job'): (events: EventSourceMessage[]) => boolean {
  let seen = 0;
  let count = 0;
  return (events) => {
    for (; seen < events.length; seen++) if (events[seen]!.event === name) count++;
    return count >= n;
  };
}
