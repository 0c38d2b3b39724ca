/** A command line the CLI cannot act on: said on stderr with the usage exit code, not a stack. */
export class UsageError extends Error {}

/** A flag or argument that must be JSON, parsed; `dflt` when it is absent. */
export const parseJson = (what: string, s: string | undefined, dflt: unknown) => {
  if (s === undefined) return dflt;
  try {
    return JSON.parse(s);
  } catch {
    throw new UsageError(`${what} is not valid JSON: ${s}`);
  }
};

/** `--kwargs`: a JSON object of keyword arguments (an array or a number would reach the handler as no call could take it). */
export const parseKwargs = (s: string | undefined): Record<string, unknown> => {
  const v = parseJson('--kwargs', s, {});
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new UsageError(`--kwargs must be a JSON object of keyword arguments, got ${s}`);
  return v as Record<string, unknown>;
};
