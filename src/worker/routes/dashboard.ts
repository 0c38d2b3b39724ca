/**
 * The dashboard's shell: `/` (the page) and `/dashboard.js` (its script, built from dashboard/ by
 * scripts/dashboard.mjs). They carry no data and need no token; everything the page shows it
 * fetches from the token-checked API with the token its user pastes. Content-Security-Policy
 * allows only this origin's script and API.
 */
import { Hono } from 'hono';
import { DASHBOARD_JS } from '../dashboard-assets.gen.ts';
import type { App } from '../plane.ts';

const CSS = `
:root{--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--bg:#fff;--accent:#0a58ca;--bad:#b42318;--ok:#1a7f37;--warn:#9a6700;font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);background:var(--bg)}
body{margin:0}header{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:center;padding:.6rem 1rem;border-bottom:1px solid var(--line);background:#f6f8fa}
header strong{font-size:1.1rem}header nav{display:flex;gap:.8rem}#who{color:var(--muted);margin-left:auto}
body:not(.signed-in) .private,body:not(.admin) .admin-only{display:none}
main{padding:1rem;max-width:1200px}h1{font-size:1.35rem;margin:.2rem 0 .8rem}h2{font-size:1.1rem;margin-top:1.4rem}
a{color:var(--accent)}a:focus-visible,button:focus-visible,input:focus-visible,select:focus-visible{outline:3px solid #8bb4ff;outline-offset:2px}
button,.button{font:inherit;padding:.35rem .8rem;border:1px solid var(--line);border-radius:6px;background:#f6f8fa;color:var(--fg);cursor:pointer;text-decoration:none;display:inline-block;margin:.2rem .3rem .2rem 0}
button:hover{background:#eef1f4}button:disabled{opacity:.6}button.danger{color:var(--bad);border-color:#f1aeb5}
.scroll{overflow-x:auto}table{border-collapse:collapse;width:100%;min-width:560px}th,td{text-align:left;padding:.4rem .6rem;border-bottom:1px solid var(--line);white-space:nowrap}th{font-weight:600;color:var(--muted);font-size:.85rem}
td.wrap{white-space:normal;min-width:14rem}.push{white-space:normal;max-width:12rem}.push div{font-size:.85rem}.push .muted{color:var(--muted)}.badge{display:inline-block;padding:.05rem .5rem;border-radius:999px;font-size:.8rem;border:1px solid var(--line)}
.badge.failed,.badge.paused,.badge.revoked{color:var(--bad);border-color:#f1aeb5}.badge.succeeded,.badge.ok{color:var(--ok);border-color:#a6dcb3}.badge.running{color:var(--accent)}.badge.cancelled{color:var(--muted)}.badge.delayed{color:var(--warn)}
.tabs{display:flex;flex-wrap:wrap;gap:.2rem;margin-bottom:.8rem}.tabs a{padding:.3rem .7rem;border-radius:6px;text-decoration:none}.tabs a[aria-current]{background:var(--accent);color:#fff}
.card{max-width:460px;border:1px solid var(--line);border-radius:8px;padding:1rem 1.2rem}.signin label,.inline label{display:block;font-weight:600;margin-top:.7rem}
input,select{font:inherit;padding:.35rem .5rem;border:1px solid #8c959f;border-radius:6px;width:100%;box-sizing:border-box}.inline{display:flex;flex-wrap:wrap;gap:.4rem;align-items:end}.inline label{margin:0}.inline input,.inline select{width:auto}
.signin button{margin-top:1rem}.error,.frame-error{color:var(--bad)}#notice{background:#fff4f4;border:1px solid #f1aeb5;padding:.5rem .8rem;border-radius:6px;margin:0 0 1rem}
.facts{display:grid;grid-template-columns:max-content 1fr;gap:.3rem 1rem}.facts dt{color:var(--muted)}.facts dd{margin:0}
.journal{border:1px solid var(--line);border-radius:6px;padding:.5rem .8rem;max-height:60vh;overflow:auto;font:13px/1.5 ui-monospace,monospace}
.journal .attempt{color:var(--muted);border-top:1px dashed var(--line);margin:.4rem 0;padding-top:.2rem}.journal .chunk{white-space:pre-wrap;margin:.2rem 0}.journal .end{color:var(--ok)}.stack summary{cursor:pointer;color:var(--muted)}.stack pre{white-space:pre-wrap;overflow-wrap:anywhere;font:12px ui-monospace,monospace;margin:.3rem 0}.logs{list-style:none;padding:0;margin:0;font:13px ui-monospace,monospace}.logs li{padding:.15rem 0;overflow-wrap:anywhere}.logs time{color:var(--muted)}.logs .warn{color:#8a5a00}.logs .error{color:var(--bad)}
.once code{background:#fff8c5;padding:.2rem .4rem;word-break:break-all}.spark{width:100px;height:24px}.spark polyline{fill:none;stroke:var(--accent);stroke-width:1.5}
.muted{color:var(--muted);margin:.2rem 0}.sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}
@media (max-width:600px){main{padding:.6rem}#who{margin-left:0;width:100%}}
`;

const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>lakeshore</title><style>${CSS}</style></head>
<body><header><strong>lakeshore</strong>
<nav class="private" aria-label="main"><a href="#/queues">Queues</a><a href="#/workers">Workers</a><a class="admin-only" href="#/tokens">Tokens</a></nav>
<span id="who" class="private"></span><button id="signout" class="private" type="button">Sign out</button></header>
<main><p id="notice" role="alert" hidden></p><div id="main"><noscript>The dashboard needs JavaScript.</noscript></div></main>
<script type="module" src="/dashboard.js"></script></body></html>`;

const SECURITY = {
  'content-security-policy': "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

export const dashboard = new Hono<App>()
  .get('/', (c) => c.html(PAGE, 200, SECURITY))
  .get('/favicon.ico', (c) => c.body(null, 204))
  .get('/dashboard.js', (c) =>
    c.body(DASHBOARD_JS, 200, { ...SECURITY, 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-cache' }),
  );
