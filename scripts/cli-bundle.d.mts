// Types of scripts/cli-bundle.mjs (plain JS: bin/lakeshore.mjs imports it before any TypeScript runs).
/** The URL to import the CLI from: its bundle under `root`, made again when a source changed; else its main.ts. */
export function cliModule(root: string): Promise<string>;
