/**
 * The dashboard: a page the plane serves at `/` (src/worker/routes/dashboard.ts). It uses only the
 * public HTTP API, through the `lakeshore` client, with the token the user pastes (kept in
 * sessionStorage, never in a URL or a cookie). Views: queues (live from each queue's feed), a
 * queue's jobs by state, one job with its live journal, and tokens (admin).
 */
import { HttpDispatch } from '../client/http/dispatch.ts';
import { errorShown, ForbiddenError, LakeshoreError, UnauthorizedError } from '../client/errors.ts';
import { FrameKind } from '../src/core/frame.ts';
import type { Invocation, JournalFrame, QueueOverview, QueuePage, Schedule, State } from '../client/types.ts';
import { callText, NEVER } from '../client/envelope.ts';
import { nextRedrawAfter } from '../client/pace.ts';
import { action, ago, badge, h, span, sparkline, table, when } from './dom.ts';

const STATES: State[] = ['queued', 'running', 'delayed', 'succeeded', 'failed', 'cancelled'];
const SESSION = 'lakeshore.session';
const main = () => document.getElementById('main')!;

interface Session {
  token: string;
  namespace: string;
}

let d: HttpDispatch | null = null;
let admin = false;
/** What the current view listens to: called off when the view changes. */
let leave = new AbortController();

function say(e: unknown): void {
  const box = document.getElementById('notice')!;
  box.textContent = e instanceof ForbiddenError ? `Not allowed for this token: ${e.message}` : e instanceof Error ? e.message : String(e);
  box.hidden = false;
}

/**
 * The most often a view redraws while its feed is busy. A redraw reads the plane (the overview
 * counts each queue's backlog), so a page left open on a busy queue reads at most once a second,
 * not once per record.
 */
const REDRAW_EVERY_MS = 1_000;
/**
 * How often a view redraws that has no feed to follow: the plane refused it (a namespace of more
 * queues than one stream follows, docs/contract.md "Lifecycle feed") or stopped answering it.
 */
const FEEDLESS_REDRAW_MS = 5_000;

/**
 * A view's redraw, driven by the feed of `queue` (null: of the namespace, one stream whatever the
 * number of queues) until the view changes: the first record after a quiet second redraws at once;
 * records that follow within the second are one redraw at its end, and a record that arrives
 * during a redraw brings one more after it (never lost).
 */
function redrawOn(queue: string | null, draw: () => Promise<unknown>, signal: AbortSignal): void {
  if (signal.aborted) return; // the view was left while it drew its first time
  let running = false;
  let again = false;
  let last = 0;
  let took = 0;
  const redraw = async () => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    do {
      // A redraw that took long waits longer (client/pace.ts): the workers view reads every page of a namespace's queues.
      const wait = last + nextRedrawAfter(REDRAW_EVERY_MS, took) - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      if (signal.aborted) break;
      again = false; // what arrived while waiting, this redraw shows
      last = Date.now();
      await draw().catch(say);
      took = Date.now() - last;
    } while (again);
    running = false;
  };
  void (async () => {
    try {
      for await (const _ of d!.events(queue, { signal })) void redraw();
    } catch {
      // No feed: the view still changes, every few seconds rather than as records come.
      while (!signal.aborted) {
        await new Promise((r) => setTimeout(r, FEEDLESS_REDRAW_MS));
        if (!signal.aborted) await redraw();
      }
    }
  })();
}

// ------------------------------------------------------------------ sign-in

async function signIn(s: Session): Promise<void> {
  const c = new HttpDispatch(location.origin, { token: s.token, namespace: s.namespace, retryForMs: 0 });
  await c.storage(); // refused here (one read, not the overview): 401 for a wrong token, 403 for another namespace's
  // An admin token may list tokens; anything else is refused: that is how the page knows its controls.
  admin = await c.listTokens().then(
    () => true,
    () => false,
  );
  d = c;
  sessionStorage.setItem(SESSION, JSON.stringify(s));
  document.getElementById('who')!.textContent = `${s.namespace} · ${admin ? 'admin' : 'producer or worker'} token`;
  document.body.classList.toggle('admin', admin);
  document.body.classList.add('signed-in');
}

function signInView(message = ''): void {
  document.body.classList.remove('signed-in', 'admin');
  const token = h('input', { id: 'token', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false' });
  const ns = h('input', { id: 'ns', value: 'default', required: true });
  const err = h('p', { class: 'error', role: 'alert', id: 'signin-error' }, message);
  const form = h(
    'form',
    { class: 'card signin' },
    h('h1', {}, 'Sign in'),
    h(
      'p',
      {},
      'Paste a token. A producer token sees every queue and job and may cancel and retry; an admin token also pauses queues and manages tokens. The token stays in this tab (sessionStorage).',
    ),
    h('label', { for: 'token' }, 'Token'),
    token,
    h('label', { for: 'ns' }, 'Namespace'),
    ns,
    h('button', { type: 'submit' }, 'Sign in'),
    err,
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    try {
      await signIn({ token: token.value.trim(), namespace: ns.value.trim() });
      // A new hash routes on its hashchange; routing here too would open the view twice.
      if (location.hash === '#/queues') void route();
      else location.hash = '#/queues';
    } catch (e) {
      err.textContent =
        e instanceof UnauthorizedError
          ? `That token was refused: ${e.message}`
          : e instanceof ForbiddenError
            ? `That token belongs to another namespace: ${e.message}`
            : `The plane could not be reached: ${(e as Error).message}`;
    }
  });
  main().replaceChildren(form);
  token.focus();
}

// ------------------------------------------------------------------ queues

/** A count from the overview: succeeded and cancelled are counted up to a cap, past which there are at least that many. */
const count = (q: QueueOverview, s: State) => `${q.counts[s].toLocaleString('en')}${q.capped.includes(s) ? '+' : ''}`;

/** A push queue's target and its pusher's figures: in flight, the target's answer time, the last error. */
function pushCell(q: QueueOverview): Node | string {
  const t = q.settings.push;
  if (!t) return '—';
  const p = q.pushing;
  const batches = t.batchSize > 1 ? ` (batches of ${t.batchSize})` : '';
  let host = t.url;
  try {
    host = new URL(t.url).host;
  } catch {
    /* shown as set */
  }
  const line = (text: string, attrs: Record<string, string> = {}) => h('div', attrs, text);
  const lines = [line(`→ ${host}`, { title: t.url })];
  if (p) {
    const { acked, accepted, nacked, refused } = p.delivered;
    lines.push(
      line(`${p.inFlight}/${t.concurrency} in flight${batches} · ${acked + accepted} delivered, ${nacked + refused} not`, {
        class: 'muted',
      }),
    );
    if (p.latencyMs) lines.push(line(`answers in p50 ${p.latencyMs.p50} ms, p99 ${p.latencyMs.p99} ms`, { class: 'muted' }));
    if (p.lastError) {
      const e = p.lastError;
      lines.push(
        line(`last error ${ago(e.at)}: ${e.status ?? 'no answer'}${e.id ? ` (${e.id})` : ''}`, { class: 'error', title: e.message }),
      );
    }
  } else lines.push(line(`${t.concurrency} at once${batches}`, { class: 'muted' }));
  return h('div', { class: 'push' }, ...lines);
}

/**
 * The namespace's queues, a page of 100 at a time (`after`: the last queue of the page before;
 * null: the first): a redraw reads that page's overview, whatever the namespace holds.
 */
async function queuesView(after: string | null): Promise<void> {
  const signal = leave.signal; // this view's: a later view's is another
  const box = h('section', { 'aria-labelledby': 'qh' }, h('h1', { id: 'qh' }, 'Queues'));
  main().replaceChildren(box);
  const draw = ({ queues: all, next }: QueuePage) => {
    const rows = all.map((q) => [
      h('a', { href: `#/q/${encodeURIComponent(q.queue)}` }, q.queue),
      count(q, 'queued'),
      count(q, 'running'),
      count(q, 'delayed'),
      count(q, 'succeeded'),
      q.counts.failed ? h('a', { href: `#/q/${encodeURIComponent(q.queue)}/failed`, class: 'error' }, count(q, 'failed')) : '0',
      count(q, 'cancelled'),
      span(q.oldestQueuedMs),
      sparkline(
        q.recent.succeeded,
        `jobs succeeded per 10 s over the last 5 minutes in ${q.queue}: ${q.recent.succeeded.reduce((a, b) => a + b, 0)}`,
      ),
      q.paused ? badge('paused') : badge('active', 'ok'),
      [
        q.settings.maxRunning ? `max ${q.settings.maxRunning} running` : '',
        q.settings.claimsPerSecond ? `${q.settings.claimsPerSecond}/s` : '',
      ]
        .filter(Boolean)
        .join(', ') || '—',
      pushCell(q),
      admin
        ? action(
            q.paused ? 'Resume' : 'Pause',
            async () => (q.paused ? d!.resumeQueue(q.queue) : d!.pauseQueue(q.queue)).then(refresh),
            say,
          )
        : h('span', {}, ''),
    ]);
    box.replaceChildren(
      box.firstChild!,
      all.length
        ? table(
            [
              'queue',
              'queued',
              'running',
              'delayed',
              'succeeded',
              'failed',
              'cancelled',
              'oldest wait',
              'succeeded/10 s',
              'state',
              'caps',
              'push',
              admin ? 'admin' : '',
            ],
            rows,
            'Queues, live',
          )
        : h('p', {}, after === null ? 'No queues yet: submit a job and it appears here.' : 'No queues past this point.'),
      next === null ? h('span') : h('a', { class: 'button', href: `#/queues/${encodeURIComponent(next)}` }, 'Next page'),
      after === null ? h('span') : h('a', { class: 'button', href: '#/queues' }, 'First page'),
    );
  };
  const refresh = async () => draw(await d!.overviewPage({ after }));
  draw(await d!.overviewPage({ after }));
  // Live: each queue's feed redraws the counts and the sparkline (the plane keeps the last 5 minutes).
  redrawOn(null, refresh, signal);
}

// ------------------------------------------------------------------ a queue

async function queueView(queue: string, state: State, cursor: string | null): Promise<void> {
  const signal = leave.signal;
  const tabs = h(
    'nav',
    { class: 'tabs', 'aria-label': 'states' },
    ...STATES.map((s) => h('a', { href: `#/q/${encodeURIComponent(queue)}/${s}`, 'aria-current': s === state ? 'page' : null }, s)),
  );
  const list = h('div');
  const schedules = h('div');
  main().replaceChildren(h('section', {}, h('h1', {}, `Queue ${queue}`), tabs, list, schedules));
  // Its cron schedules (an admin's to read and set): what each tick submits, and when.
  const drawSchedules = async () => schedules.replaceChildren(schedulesTable(queue, await d!.listSchedules(queue), drawSchedules));
  if (admin) await drawSchedules().catch(say);
  const draw = async () => {
    const page = await d!.list(queue, { state, limit: 25, cursor });
    const rows = page.items.map((j) => [
      h('a', { href: `#/i/${encodeURIComponent(j.id)}` }, j.id),
      badge(j.state),
      String(j.attempt),
      j.workerId ?? '—',
      ago(j.finishedAt ?? j.updatedAt),
      j.error ? `${j.error.type ?? 'Error'}: ${j.error.message}` : '',
      state === 'failed' ? action('Retry', () => d!.retry(j.id).then(draw), say) : h('span', {}, ''),
    ]);
    list.replaceChildren(
      state === 'failed' && page.items.length
        ? action('Retry all failed (redrive)', () => d!.redrive(queue, { limit: 100 }).then(draw), say)
        : h('span'),
      page.items.length
        ? table(['id', 'state', 'attempt', 'worker', 'when', 'error', ''], rows, `${state} jobs of ${queue}`)
        : h('p', {}, `No ${state} jobs.`),
      page.cursor
        ? h('a', { class: 'button', href: `#/q/${encodeURIComponent(queue)}/${state}/${encodeURIComponent(page.cursor)}` }, 'Next page')
        : h('span'),
      cursor ? h('a', { class: 'button', href: `#/q/${encodeURIComponent(queue)}/${state}` }, 'First page') : h('span'),
    );
  };
  await draw();
  if (!cursor) redrawOn(queue, draw, signal);
}

function schedulesTable(queue: string, all: Schedule[], redraw: () => Promise<unknown>): Node {
  if (!all.length) return h('span');
  return h(
    'div',
    {},
    h('h2', {}, 'Schedules'),
    table(
      ['name', 'cron', 'time zone', 'submits', 'priority', 'next', 'last', ''],
      all.map((s) => [
        s.name,
        h('code', {}, s.cron),
        s.timezone ?? 'UTC',
        h('code', {}, callText(s.envelope)),
        String(s.priority),
        s.nextAt >= NEVER ? 'never (a cron this plane cannot read: set it again)' : when(s.nextAt),
        when(s.lastAt),
        action('Remove', () => d!.removeSchedule(queue, s.name).then(redraw), say, 'danger'),
      ]),
      `cron schedules of ${queue}`,
    ),
  );
}

// ------------------------------------------------------------------ one job

const text = (b: Uint8Array) => new TextDecoder().decode(b);
function shownValue(b: Uint8Array): string {
  const t = text(b);
  try {
    return JSON.stringify(JSON.parse(t));
  } catch {
    return t;
  }
}

/** A failure: its type and message, and its stack folded under them (errorShown). */
function errorView(e: object): Node {
  const { head, stack } = errorShown(e);
  const line = h('span', { class: 'error' }, head);
  return stack ? h('span', {}, line, h('details', { class: 'stack' }, h('summary', {}, 'stack'), h('pre', {}, stack))) : line;
}

/** An ERROR frame's body: the error object a worker writes, shown as the job's error is; else its text. */
function frameError(body: Uint8Array): Node | string {
  try {
    const e = JSON.parse(new TextDecoder().decode(body)) as unknown;
    if (e && typeof e === 'object' && typeof (e as { message?: unknown }).message === 'string') return errorView(e);
  } catch {
    // not JSON: shown as it is
  }
  return shownValue(body);
}

async function jobView(id: string): Promise<void> {
  const signal = leave.signal;
  const facts = h('dl', { class: 'facts' });
  const controls = h('div', { class: 'controls' });
  const journal = h('div', { class: 'journal', 'aria-live': 'polite' });
  const logs = h('ol', { class: 'logs' });
  const logBox = h('section', { hidden: true }, h('h2', {}, 'Log (live: lines logged while this page is open)'), logs);
  main().replaceChildren(h('section', {}, h('h1', {}, `Job ${id}`), controls, facts, h('h2', {}, 'Journal'), journal, logBox));
  const draw = async () => {
    const inv: Invocation | null = await d!.get(id);
    if (!inv) {
      facts.replaceChildren(h('p', {}, "No such job here (or it was purged after its queue's retention)."));
      return null;
    }
    const row = (k: string, v: Node | string) => [h('dt', {}, k), h('dd', {}, v)];
    facts.replaceChildren(
      ...row('state', badge(inv.state)),
      ...row('queue', h('a', { href: `#/q/${encodeURIComponent(inv.queue)}` }, inv.queue)),
      ...(inv.envelope?.length ? row('call', h('code', {}, callText(inv.envelope))) : []),
      ...row('attempt', `${inv.attempt}${inv.maxAttempts ? ` of ${inv.maxAttempts}` : ''}`),
      ...row('worker', inv.workerId ?? '—'),
      ...row('created', when(inv.createdAt)),
      // A delayed job (its delay, or a retry's backoff) says when it may run again.
      ...(inv.state === 'delayed' ? row('due', when(inv.runAt)) : []),
      ...row('started', when(inv.startedAt)),
      ...row('finished', when(inv.finishedAt)),
      // A job waiting again after a failed attempt shows that attempt's error as the last one.
      ...(inv.error ? row(inv.state === 'failed' || inv.state === 'cancelled' ? 'error' : 'last error', errorView(inv.error)) : []),
    );
    const live = inv.state === 'queued' || inv.state === 'running' || inv.state === 'delayed';
    controls.replaceChildren(
      live ? action('Cancel', () => d!.cancel(id).then(draw), say, 'danger') : h('span'),
      inv.state === 'failed' ? action('Retry', () => d!.retry(id).then(draw), say) : h('span'),
    );
    return inv;
  };
  const inv = await draw();
  if (!inv || signal.aborted) return;
  // The row follows the queue's feed, and so does the handler's log; the journal streams as the worker writes it.
  void (async () => {
    for await (const rec of d!.events(inv.queue, { signal })) {
      if (rec.kind === 'job' && rec.id === id) await draw();
      else if (rec.kind === 'worker' && 'level' in rec && rec.id === id) {
        logBox.hidden = false;
        logs.append(
          h(
            'li',
            { class: `log ${rec.level}` },
            h('time', { datetime: new Date(rec.at).toISOString() }, new Date(rec.at).toLocaleTimeString()),
            ` ${rec.level} `,
            rec.message,
          ),
        );
      }
    }
  })().catch(() => {});
  let attempt = -1;
  let chunk: HTMLElement | null = null;
  // A run of CHUNK frames is one stream of raw output: a character split between frames decodes whole.
  let raw = new TextDecoder();
  const show = (f: JournalFrame) => {
    if (f.attempt !== attempt) {
      attempt = f.attempt;
      chunk = null;
      journal.append(h('div', { class: 'attempt' }, `attempt ${f.attempt}`));
    }
    if (f.kind === FrameKind.CHUNK) {
      if (!chunk) {
        journal.append((chunk = h('pre', { class: 'chunk' })));
        raw = new TextDecoder();
      }
      chunk.textContent += raw.decode(f.body, { stream: true });
      return;
    }
    chunk = null;
    if (f.kind === FrameKind.VALUE) journal.append(h('div', { class: 'value' }, shownValue(f.body)));
    else if (f.kind === FrameKind.ERROR) journal.append(h('div', { class: 'frame-error' }, 'error: ', frameError(f.body)));
    else if (f.kind === FrameKind.END) journal.append(h('div', { class: 'end' }, 'end'));
  };
  journal.replaceChildren(h('p', { class: 'muted' }, 'No frames yet.'));
  let first = true;
  try {
    for await (const f of d!.journalRead(id, { signal })) {
      if (first) journal.replaceChildren();
      first = false;
      show(f);
    }
    if (first) journal.replaceChildren(h('p', { class: 'muted' }, 'This job wrote no frames.'));
  } catch (e) {
    if (!signal.aborted) say(e);
  }
}

// ------------------------------------------------------------------ workers

async function workersView(): Promise<void> {
  const signal = leave.signal;
  const out = h('div');
  main().replaceChildren(h('section', {}, h('h1', {}, 'Workers'), out));
  const draw = async () => {
    const ws = await d!.workers();
    out.replaceChildren(
      ws.length
        ? table(
            ['worker', 'state', 'queues', 'host', 'version', 'slots', 'last heard', 'holding'],
            ws.map((w) => [
              h('code', {}, w.worker_id),
              badge(
                w.status === 'active' ? 'active' : w.status,
                w.status === 'active' ? 'ok' : w.status === 'lost' ? 'failed' : 'cancelled',
              ),
              w.queues.join(', '),
              w.host ? `${w.host}${w.pid ? `:${w.pid}` : ''}` : '—',
              w.version ?? '—',
              w.concurrency === null ? '—' : String(w.concurrency),
              ago(w.last_seen),
              w.holding.length
                ? h(
                    'span',
                    {},
                    ...w.holding.slice(0, 5).flatMap((j, i) => [i ? ', ' : '', h('a', { href: `#/i/${encodeURIComponent(j.id)}` }, j.id)]),
                    w.holding.length > 5 ? ` and ${w.holding.length - 5} more` : '',
                  )
                : 'nothing',
            ]),
            'Workers heard from lately',
          )
        : h('p', {}, 'No worker heard from lately.'),
    );
  };
  await draw();
  // Live: any queue's feed (a worker came, went, or took or finished a job) redraws the list.
  redrawOn(null, draw, signal);
}

// ------------------------------------------------------------------ tokens

async function tokensView(): Promise<void> {
  const out = h('div');
  const role = h('select', { id: 'role' }, ...['producer', 'worker', 'admin'].map((r) => h('option', { value: r }, r)));
  const name = h('input', { id: 'tname', placeholder: 'what it is for' });
  const shown = h('p', { class: 'once', role: 'status' });
  const form = h(
    'form',
    { class: 'inline' },
    h('label', { for: 'role' }, 'Role'),
    role,
    h('label', { for: 'tname' }, 'Name'),
    name,
    h('button', { type: 'submit' }, 'Create token'),
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      const t = await d!.createToken(role.value as 'producer', { name: name.value || undefined });
      shown.replaceChildren('New token (shown this once, copy it now): ', h('code', {}, t.token));
      await draw();
    } catch (e) {
      say(e);
    }
  });
  main().replaceChildren(h('section', {}, h('h1', {}, 'Tokens'), form, shown, out));
  const draw = async () => {
    const ts = await d!.listTokens();
    out.replaceChildren(
      table(
        ['id', 'role', 'pools', 'name', 'created', 'state', ''],
        ts.map((t) => [
          h('code', {}, t.id),
          t.role,
          t.pools ? t.pools.join(', ') : 'all',
          t.name ?? '',
          ago(t.created_at),
          t.revoked_at ? badge('revoked') : badge('active', 'ok'),
          t.revoked_at ? h('span') : action('Revoke', () => d!.revokeToken(t.id).then(draw), say, 'danger'),
        ]),
        'Tokens of this namespace',
      ),
    );
  };
  await draw();
}

// ------------------------------------------------------------------ routing

async function route(): Promise<void> {
  leave.abort();
  leave = new AbortController();
  document.getElementById('notice')!.hidden = true;
  if (!d) return signInView();
  const [, view, a, b, c] = location.hash.split('/').map(decodeURIComponent);
  try {
    if (view === 'q' && a) await queueView(a, (STATES.includes(b as State) ? b : 'queued') as State, c || null);
    else if (view === 'i' && a) await jobView(a);
    else if (view === 'tokens' && admin) await tokensView();
    else if (view === 'workers') await workersView();
    else await queuesView(view === 'queues' && a ? a : null);
  } catch (e) {
    if (e instanceof UnauthorizedError) return signInView(`Signed out: ${e.message}`);
    say(e instanceof LakeshoreError ? e : e);
  }
}

document.getElementById('signout')!.addEventListener('click', () => {
  sessionStorage.removeItem(SESSION);
  d = null;
  location.hash = '';
  void route();
});
window.addEventListener('hashchange', () => void route());

const saved = sessionStorage.getItem(SESSION);
if (saved) {
  signIn(JSON.parse(saved) as Session).then(route, () => signInView('Your session ended: sign in again.'));
} else signInView();
