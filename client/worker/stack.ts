/** A failed job's stack, as its ERROR frame and its row keep it. */

/**
 * Where this client's modules are (client/ in a checkout; the package's root once bundled), as a
 * frame names it: a file URL, or a path (where source maps rewrote it, as under a test runner).
 * None where a module has no URL of its own: a Worker's bundle (workerd leaves `import.meta.url`
 * undefined there), whose stacks name no file of ours to cut.
 */
const OURS_AS: string[] = (() => {
  const here: unknown = import.meta.url;
  try {
    const ours = new URL('../', typeof here === 'string' ? here : undefined);
    return [ours.href, decodeURIComponent(ours.pathname)];
  } catch {
    return [];
  }
})();

/**
 * The stack down to the handler's frames: the worker's own frames below them (the attempt, the job
 * context, the span) and Node's internals between them say nothing of the failure, so they are cut.
 * A stack with no frame outside the worker (an error the worker raised itself) is kept whole.
 */
export function stackOf(stack: string | undefined): string | null {
  if (!stack) return null;
  const lines = stack.split('\n');
  const frame = (l: string) => /^\s+at /.test(l);
  const theirs = (l: string) => frame(l) && !OURS_AS.some((o) => l.includes(o)) && !/\(node:|at node:/.test(l);
  let last = -1;
  for (let i = lines.length - 1; i >= 0; i--)
    if (theirs(lines[i]!)) {
      last = i;
      break;
    }
  return last < 0 ? stack : lines.slice(0, last + 1).join('\n');
}
