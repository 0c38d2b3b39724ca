/** The CLI's commands, each a function of parsed flags, one file per kind of work. */
export { cancel, get, result, submit, tail } from './jobs.ts';
export { results } from './results.ts';
export { sizeOf, stats } from './stats.ts';
export { dev, worker, type WorkerFlags } from './serve.ts';
export { moveNamespace, moveStatus, shards, streamUrl, token } from './admin.ts';
export { UsageError } from './usage.ts';
