/**
 * What the browser tests stand on: Debian's Chromium driven by playwright-core (never a
 * downloaded browser), pages served from loopback origins of their own, and a plane of their own
 * whose CORS_ORIGINS names one of those origins and not the other.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { chromium, type Browser } from 'playwright-core';
import { newToken, startPlane, type Plane } from '../../scripts/plane.mjs';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export function launch(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
}

/** lakeshore/browser as one ES module, built from its source as the package builds it. */
async function browserModule(): Promise<string> {
  const out = await build({
    entryPoints: [join(ROOT, 'client', 'browser', 'index.ts')],
    bundle: true,
    format: 'esm',
    target: 'es2022',
    platform: 'browser',
    write: false,
    logLevel: 'error',
  });
  return out.outputFiles[0]!.text;
}

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>lakeshore stream</title>
<style>body{font:14px system-ui;margin:24px} pre{background:#f4f4f4;padding:12px;max-height:420px;overflow:auto;white-space:pre-wrap} .end{color:#070} .err{color:#b00}</style>
</head><body>
<h1>lakeshore: a job, live</h1>
<p id="status">waiting</p>
<pre id="out"></pre>
<script type="module">
  import * as lake from '/lakeshore-browser.js';
  window.lake = lake;
  window.ready = true;
</script>
</body></html>`;

export interface Site {
  origin: string;
  close(): Promise<void>;
}

/** The README's example page (its one html block), served as it is printed there. */
export function readmePage(): string {
  const m = /```html\n([\s\S]*?)```/.exec(readFileSync(join(ROOT, 'README.md'), 'utf8'));
  if (!m) throw new Error('README.md has no html block');
  return m[1]!;
}

/** A static site on its own loopback port: the test page, the README's page, and the module. */
export async function site(): Promise<Site> {
  const js = await browserModule();
  const example = readmePage();
  const server: Server = createServer((req, res) => {
    if (req.url === '/lakeshore-browser.js') res.writeHead(200, { 'content-type': 'text/javascript' }).end(js);
    else if (req.url?.startsWith('/example.html')) res.writeHead(200, { 'content-type': 'text/html' }).end(example);
    else if (req.url === '/' || req.url?.startsWith('/?')) res.writeHead(200, { 'content-type': 'text/html' }).end(PAGE);
    else res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

export interface TestPlane {
  plane: Plane;
  token: string;
  stop(): Promise<void>;
}

/** A plane of the browser tests' own, allowing `origins` (CORS_ORIGINS). */
export async function plane(origins: string[]): Promise<TestPlane> {
  const dir = mkdtempSync(join(tmpdir(), 'lakeshore-browser-'));
  const token = newToken('lsk_browser_');
  const p = await startPlane({
    node: process.execPath,
    env: process.env,
    persistTo: dir,
    vars: { LAKESHORE_TOKEN: token, CORS_ORIGINS: origins.join(',') },
  });
  return {
    plane: p,
    token,
    stop: async () => {
      await p.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
