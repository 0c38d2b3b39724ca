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
export const sseEvents = (body: ReadableStream<Uint8Array>, signal?: AbortSignal): AsyncIterableIterator<EventSourceMessage> =>
  oneByOne(sseBatches(body, signal));

/**
 * Items one by one from batches of them, for a `for await` reader: an item already in hand is
 * answered at once (one resolved promise), not through an async generator's yield (a few
 * microtask turns each): about a tenth of a busy feed reader's CPU a record, measured. Ending
 * the iteration early (`break`, `return()`) ends the batches' generator, running its cleanup.
 */
export function oneByOne<T>(batches: AsyncGenerator<T[]>): AsyncIterableIterator<T> {
  let batch: T[] = [];
  let next = 0;
  const pull = async (): Promise<IteratorResult<T>> => {
    for (;;) {
      const r = await batches.next();
      if (r.done) return { value: undefined, done: true };
      if (r.value.length) {
        batch = r.value;
        next = 1;
        return { value: batch[0]!, done: false };
      }
    }
  };
  return {
    next: () => (next < batch.length ? Promise.resolve({ value: batch[next++]!, done: false }) : pull()),
    return: async () => {
      batch = [];
      await batches.return(undefined);
      return { value: undefined, done: true };
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}
