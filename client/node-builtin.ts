/**
 * A Node built-in the client loads only when it runs where one exists (Node, Bun, Deno), out of
 * a bundler's sight: a Worker without nodejs_compat, or a page, bundles the code that would use
 * it and never the module (`@dreamlake/lakeshore/push` bundles with no flag; test/node/package.test.ts).
 */
export function nodeBuiltin<T>(name: `node:${string}`): Promise<T> {
  return import(/* webpackIgnore: true */ /* @vite-ignore */ name) as Promise<T>;
}
