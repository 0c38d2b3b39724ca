/** Small DOM helpers for the dashboard: elements, time, and the pieces every view shares. */

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | ((ev: Event) => void) | null | undefined>;

/** An element: attributes (`on*` are listeners; false/null are left out) and children. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (typeof v === 'function') el.addEventListener(k.slice(2).toLowerCase(), v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(typeof c === 'object' ? c : String(c));
  return el;
}

/** How long ago (or ahead) `ms` is, in words: "12 s ago", "3 min", "2 h ago". */
export function ago(ms: number | null, now = Date.now()): string {
  if (ms === null) return '—';
  const d = Math.round((now - ms) / 1000);
  const a = Math.abs(d);
  const v =
    a < 60 ? `${a} s` : a < 3600 ? `${Math.round(a / 60)} min` : a < 86_400 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86_400)} d`;
  return d >= 0 ? `${v} ago` : `in ${v}`;
}

/** A duration in words: "4 s", "12 min". */
export const span = (ms: number | null): string => (ms === null ? '—' : ago(Date.now() - ms).replace(' ago', ''));

/** A moment as local time, with how long ago in its title. */
export const when = (ms: number | null) =>
  ms === null
    ? h('span', {}, '—')
    : h('time', { datetime: new Date(ms).toISOString(), title: ago(ms) }, `${new Date(ms).toLocaleString()} (${ago(ms)})`);

/** A table in a box that scrolls sideways on a narrow screen. */
export function table(head: string[], rows: (Node | string)[][], caption: string): HTMLElement {
  return h(
    'div',
    { class: 'scroll' },
    h(
      'table',
      {},
      h('caption', { class: 'sr' }, caption),
      h('thead', {}, h('tr', {}, ...head.map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, ...rows.map((r) => h('tr', {}, ...r.map((c, i) => h('td', { class: head[i] === 'error' ? 'wrap' : null }, c))))),
    ),
  );
}

export const badge = (text: string, kind = text) => h('span', { class: `badge ${kind}` }, text);

/** A button that runs `act`, disabled while it runs; its error goes to `say`. */
export function action(label: string, act: () => Promise<unknown>, say: (e: unknown) => void, cls = ''): HTMLButtonElement {
  const b = h('button', { type: 'button', class: cls }, label);
  b.addEventListener('click', async () => {
    b.disabled = true;
    try {
      await act();
    } catch (e) {
      say(e);
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

/** A tiny SVG sparkline of `values` (oldest first). */
export function sparkline(values: number[], label: string): SVGSVGElement {
  const w = 100;
  const hgt = 24;
  const max = Math.max(1, ...values);
  const step = values.length > 1 ? w / (values.length - 1) : w;
  const pts = values.map((v, i) => `${(i * step).toFixed(1)},${(hgt - (v / max) * (hgt - 2) - 1).toFixed(1)}`).join(' ');
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('viewBox', `0 0 ${w} ${hgt}`);
  svg.setAttribute('class', 'spark');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', label);
  const line = document.createElementNS('http://www.w3.org/2000/svg', 'polyline');
  line.setAttribute('points', pts);
  svg.append(line);
  return svg;
}
