/** The HTTP face of the edge plane. Every route but /health needs a bearer token. */
import { Hono } from 'hono';
import { LakeshoreError, toError } from '../core/errors.ts';
import { platformError } from '../core/platform-errors.ts';
import { authenticate } from './auth.ts';
import { bookmarks } from './bookmarks.ts';
import { corsHeaders } from './cors.ts';
import type { App } from './plane.ts';
import { invocations } from './routes/invocations.ts';
import { journal } from './routes/journal.ts';
import { queues } from './routes/queues.ts';
import { tokens } from './routes/tokens.ts';
import { code } from './routes/code.ts';
import { observe } from './routes/observe.ts';
import { dashboard } from './routes/dashboard.ts';
import { move } from './routes/move.ts';
import { shards } from './routes/shards.ts';

export const app = new Hono<App>();

app.get('/health', (c) => c.json({ ok: true, service: 'lakeshore' }));
// The dashboard's page and script: no data, no token (the page asks for one).
app.route('/', dashboard);

// CORS first: preflights carry no token, and refusals (401, 429) must reach the page readable.
app.use('/v1/*', corsHeaders);
app.use('/v1/*', authenticate);
app.use('/v1/*', bookmarks);
app.route('/v1/ns/:ns/queues', queues);
app.route('/v1/ns/:ns/invocations', invocations);
app.route('/v1/ns/:ns/invocations', journal);
app.route('/v1/ns/:ns/tokens', tokens);
app.route('/v1/ns/:ns/code', code);
app.route('/v1/ns/:ns/move', move);
app.route('/v1/ns/:ns', observe);
app.route('/v1/shards', shards);

app.notFound((c) => c.json({ error: { code: 'not_found', message: `no route for ${c.req.method} ${new URL(c.req.url).pathname}` } }, 404));

app.onError((thrown, c) => {
  // A call that failed on the platform's side (an object restarting, an overload): answered so that clients retry.
  const passing = platformError(thrown);
  if (passing) console.warn(c.req.method, new URL(c.req.url).pathname, passing.message);
  const err = passing ?? thrown;
  if (err instanceof LakeshoreError) {
    if (err.code === 'rate_limited') c.header('Retry-After', String(Math.max(1, Math.ceil((err.retryAfterMs ?? 1000) / 1000))));
    return c.json({ error: err.toJSON() }, err.status as 400);
  }
  // Anything unknown is logged here and answered without its detail.
  console.error('unhandled error', c.req.method, new URL(c.req.url).pathname, toError(thrown));
  return c.json({ error: { code: 'internal', message: 'internal error' } }, 500);
});
