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
