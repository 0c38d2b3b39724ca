/** Reads a `text/event-stream` response body as events. */
import { createParser, type EventSourceMessage } from 'eventsource-parser';

/**
 * The events of each chunk, together: one await per chunk, not per event, for readers that take
 * thousands of events a second (a feed's records come in bursts, flushed together).
 */
export async function* sseBatches(body: ReadableStream<Uint8Array>, signal?: AbortSignal): AsyncGenerator<EventSourceMessage[]> {
  let batch: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (e) => batch.push(e) });
  const reader = body.pipeThrough(new TextDecoderStream() as unknown as ReadableWritablePair<string, Uint8Array>).getReader();
  const onAbort = () => void reader.cancel().catch(() => {});
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      parser.feed(value);
      if (batch.length) {
        const out = batch;
        batch = [];
        yield out;
      }
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    reader.releaseLock();
  }
}

/** The events one by one. */
export async function* sseEvents(body: ReadableStream<Uint8Array>, signal?: AbortSignal): AsyncGenerator<EventSourceMessage> {
  for await (const batch of sseBatches(body, signal)) yield* batch;
}
