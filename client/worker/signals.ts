/**
 * A signal aborted once either is (AbortSignal.any, which Node 18 lacks; neither given: never),
 * and how to take its listeners off them.
 */
export function eitherSignal(a: AbortSignal | undefined, b: AbortSignal | undefined): [AbortSignal, () => void] {
  if (!a || !b) return [a ?? b ?? new AbortController().signal, () => {}];
  const both = new AbortController();
  const abort = () => both.abort();
  if (a.aborted || b.aborted) abort();
  a.addEventListener('abort', abort, { once: true });
  b.addEventListener('abort', abort, { once: true });
  return [
    both.signal,
    () => {
      a.removeEventListener('abort', abort);
      b.removeEventListener('abort', abort);
    },
  ];
}
