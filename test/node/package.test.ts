/**
 * The npm package as a user gets it: `npm run pack`'s tarball installed into an empty project
 * with the system's own Node (20 on these machines) and npm, then the README's tour.mjs run
 * against a plane, `npx lakeshore --help`, and the types. No warnings anywhere.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, newToken, startPlane } from '../../scripts/plane.mjs';
import { encodeEnvelope, HttpDispatch } from '../../client/local/index.ts';
import { tempDir } from '../support/tmp.ts';
import { until } from '../support/wait.ts';

const ROOT = resolve(import.meta.dirname, '..', '..');

/** The machine's own Node (not the toolchain's Node 22): the first `node` on PATH outside .toolchain. */
function systemNode(): string {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const bin = join(dir, 'node');
    if (dir && !dir.includes('.toolchain') && existsSync(bin)) return bin;
  }
  return process.execPath;
}

const NODE = systemNode();
const nodeVersion = execFileSync(NODE, ['--version'], { encoding: 'utf8' }).trim();
// The system npm, run by the system Node, with that Node first on PATH (as a user's shell has it).
const env: NodeJS.ProcessEnv = {
  ...process.env,
  PATH: [
    dirname(NODE),
    ...(process.env.PATH ?? '').split(delimiter).filter((d) => !d.includes('.toolchain') && !d.includes('node_modules')),
  ].join(delimiter),
};
for (const k of Object.keys(env)) if (k.startsWith('npm_')) delete env[k]; // not the test runner's npm settings

let project = '';
let installErr = '';

beforeAll(() => {
  const out = tempDir('lakeshore-pack-');
  const tarball = execFileSync(process.execPath, [join(ROOT, 'scripts', 'pack.mjs'), '--out', out], { cwd: ROOT, encoding: 'utf8' })
    .trim()
    .split('\n')
    .pop()!;
  project = tempDir('lakeshore-project-');
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'tour', private: true, type: 'module' }));
  const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball], { cwd: project, env, encoding: 'utf8' });
  installErr = r.stderr;
  if (r.status !== 0) throw new Error(`npm install of the package failed:\n${r.stderr}`);
}, 180_000);

describe(`the lakeshore package on the system Node (${nodeVersion})`, () => {
  it('installs with no warning (no EBADENGINE, no install scripts)', () => {
    expect(installErr).toBe('');
  });

  describe('against a plane', () => {
    let plane: Awaited<ReturnType<typeof startPlane>>;
    const token = newToken('lsk_test_');
    beforeAll(async () => {
      plane = await startPlane({
        node: process.execPath,
        env: process.env,
        persistTo: tempDir('lakeshore-pack-plane-'),
        vars: { LAKESHORE_TOKEN: token },
      });
    }, 120_000);
    afterAll(async () => plane?.stop());

    it("runs the README's tour.mjs as written, with no warning", () => {
      const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
      const tour = /cat > \/tmp\/lakeshore-tour\/tour\.mjs <<'JS'\n([\s\S]*?)\nJS\n/.exec(readme)?.[1];
      expect(tour, 'the tour.mjs block of the README').toBeDefined();
      writeFileSync(join(project, 'tour.mjs'), tour!);
      const r = spawnSync(NODE, ['tour.mjs'], {
        cwd: project,
        env: { ...env, LAKESHORE_URL: plane.url, LAKESHORE_TOKEN: token },
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(r.stderr).toBe('');
      expect(r.stdout).toBe('frame 0 1\nresult 3\n');
      expect(r.status).toBe(0);
    });

    it("runs the README's push receiver as written: a pushed job comes back as its answer", async () => {
      const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
      const source = /cat > \/tmp\/lakeshore-tour\/receiver\.mjs <<'JS'\n([\s\S]*?)\nJS\n/.exec(readme)?.[1];
      expect(source, 'the receiver.mjs block of the README').toBeDefined();
      const port = await freePort();
      // The README's port, 8790, may be taken here: the one change.
      writeFileSync(join(project, 'receiver.mjs'), source!.replace('.listen(8790,', `.listen(${port},`));
      const d = new HttpDispatch(plane.url, { token, namespace: 'default' });
      // The README's line that sets the push target and keeps its secret, run as written (in the
      // repository, against this plane) twice: a second run of the tour must get a secret too.
      const line = /^SECRET=\$\(node bin\/lakeshore\.mjs queue hooks .*$/m.exec(readme)?.[0];
      expect(line, "the README's SECRET=$(...) line").toBeDefined();
      const secretOf = () => {
        const r = spawnSync('bash', ['-c', `${line!.replace(':8790/', `:${port}/`)}\necho "$SECRET"`], {
          cwd: ROOT,
          env: { ...env, LAKESHORE_URL: plane.url, LAKESHORE_TOKEN: token, LAKESHORE_NAMESPACE: 'default' },
          encoding: 'utf8',
          timeout: 60_000,
        });
        expect(r.stderr).toBe('');
        return r.stdout.trim();
      };
      const first = secretOf();
      const secret = secretOf();
      expect([first, secret]).toEqual([expect.stringMatching(/^whsec_/), expect.stringMatching(/^whsec_/)]);
      expect(secret).not.toBe(first);
      const child = spawn(NODE, ['receiver.mjs'], {
        cwd: project,
        env: { ...env, PUSH_SECRET: secret },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr!.on('data', (b: Buffer) => (stderr += b));
      try {
        // As the README's next line waits: until it listens (it answers a stray GET 401).
        await until(
          () =>
            fetch(`http://127.0.0.1:${port}/`).then(
              (r) => r.status === 401,
              () => false,
            ),
          'the receiver listening',
          20_000,
        );
        const id = await d.submit('hooks', encodeEnvelope({ fn: 'square', args: [9] }), { id: 'pushed-81' });
        expect(new TextDecoder().decode((await d.result(id, { timeoutMs: 30_000 }))!)).toBe('81');
        expect(stderr).toBe('');
      } finally {
        child.kill();
        await d.configureQueue('hooks', { push: null });
        await d.close();
      }
    }, 60_000);

    /** `wrangler dev` of a user's Worker (`source`, with `flags`) in its own project beside the package's. */
    async function wranglerDev(name: string, source: string, flags: string[], vars: Record<string, string> = {}) {
      const dir = join(project, name);
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'worker.mjs'), source);
      writeFileSync(
        join(dir, 'wrangler.toml'),
        `name = "${name}"\nmain = "worker.mjs"\ncompatibility_date = "2025-09-01"\ncompatibility_flags = ${JSON.stringify(flags)}\n`,
      );
      writeFileSync(
        join(dir, '.dev.vars'),
        Object.entries(vars)
          .map(([k, v]) => `${k}=${v}\n`)
          .join(''),
      );
      // A port picked free may be taken (an outgoing connection's) before wrangler binds it: then
      // wrangler says so and the start is tried again on another, as scripts/plane.mjs does.
      for (let tries = 1; ; tries++) {
        const port = await freePort();
        const dev = spawn(
          process.execPath,
          [join(ROOT, 'node_modules', 'wrangler', 'bin', 'wrangler.js'), 'dev', '--port', String(port), '--ip', '127.0.0.1'],
          {
            cwd: dir,
            env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true' },
            stdio: ['ignore', 'pipe', 'pipe'],
            detached: true,
          },
        );
        let out = '';
        dev.stdout!.on('data', (b: Buffer) => (out += b));
        dev.stderr!.on('data', (b: Buffer) => (out += b));
        const stop = () => {
          if (dev.pid && dev.exitCode === null) process.kill(-dev.pid, 'SIGTERM');
        };
        const taken = () => /Address already in use/.test(out);
        await until(() => /Ready on/.test(out) || taken() || dev.exitCode !== null, `wrangler dev of ${name} ready`, 60_000);
        if (taken() && tries < 3) {
          stop();
          continue;
        }
        return { url: `http://127.0.0.1:${port}/`, output: () => out, stop };
      }
    }

    it("`lakeshore/push` runs the README's Worker receiver with no compatibility flag: it answers 202 and finishes the job with finishLater", async () => {
      const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
      const source = /```js\n(\/\/ worker\.mjs[\s\S]*?)```\n/.exec(readme)?.[1];
      expect(source, "the README's worker.mjs block").toBeDefined();
      const d = new HttpDispatch(plane.url, { token, namespace: 'default' });
      const secret = (await d.configureQueue('in-worker', { push: { url: 'http://127.0.0.1:1/' } })).settings.push!.secret!;
      // No nodejs_compat: nothing it bundles may need Node.
      const dev = await wranglerDev('receiver', source!, [], { PUSH_SECRET: secret, LAKESHORE_URL: plane.url });
      try {
        // wrangler warns of every Node built-in it meets ("may throw errors at runtime").
        expect(dev.output()).not.toMatch(/WARNING|ERROR/);
        expect((await fetch(dev.url)).status).toBe(401); // not signed
        await d.configureQueue('in-worker', { push: { url: dev.url } });
        const id = await d.submit('in-worker', encodeEnvelope({ fn: 'count', args: [4] }), { id: 'in-a-worker' });
        expect(new TextDecoder().decode((await d.result(id, { timeoutMs: 30_000 }))!)).toBe('4');
        const values = (await d.journalPage(id)).frames.filter((f) => f.kind === 0).map((f) => new TextDecoder().decode(f.body));
        expect(values).toEqual(['0', '1', '4', '9']);
      } finally {
        dev.stop();
        await d.configureQueue('in-worker', { push: null });
        await d.close();
      }
    }, 120_000);

    it('`lakeshore` loads in a Cloudflare Worker with nodejs_compat, and its client talks to the plane from there', async () => {
      const dev = await wranglerDev(
        'backend',
        `import { HttpDispatch } from '@dreamlake/lakeshore';
export default {
  async fetch(req, env) {
    const d = new HttpDispatch(env.LAKESHORE_URL, { token: env.LAKESHORE_TOKEN, namespace: 'default' });
    return Response.json(await d.count('from-a-worker'));
  },
};
`,
        ['nodejs_compat'],
        { LAKESHORE_URL: plane.url, LAKESHORE_TOKEN: token },
      );
      try {
        expect(dev.output()).not.toMatch(/ERROR/);
        const r = await fetch(dev.url);
        expect(r.status).toBe(200);
        expect(await r.json()).toBe(0);
      } finally {
        dev.stop();
      }
    }, 120_000);

    it("`npx lakeshore worker` runs a handler that imports the package: its currentJob() is the job the CLI's worker runs", async () => {
      // The CLI is a bundle of its own, and the handler's import is the package's library: two
      // copies of the worker's code in one process, which must agree on the running job.
      writeFileSync(
        join(project, 'whoami.mjs'),
        "import { currentJob } from '@dreamlake/lakeshore';\nexport const whoami = async () => currentJob().id + ' ' + currentJob().attempt;\n",
      );
      const d = new HttpDispatch(plane.url, { token, namespace: 'tour' });
      try {
        const id = await d.submit('whoami', encodeEnvelope({ fn: 'whoami', args: [] }), { id: 'who-runs-me' });
        const r = spawnSync('npx', ['lakeshore', 'worker', 'once', '--queue', 'whoami', '--module', './whoami.mjs'], {
          cwd: project,
          env: { ...env, LAKESHORE_URL: plane.url, LAKESHORE_TOKEN: token, LAKESHORE_NAMESPACE: 'tour' },
          encoding: 'utf8',
          timeout: 60_000,
        });
        expect(r.stderr).toContain('who-runs-me: succeeded');
        expect(new TextDecoder().decode((await d.result(id, { timeoutMs: 5_000 }))!)).toBe('"who-runs-me 1"');
      } finally {
        await d.close();
      }
    });

    it('npx lakeshore talks to the plane', () => {
      const r = spawnSync('npx', ['lakeshore', 'stats', 'tour'], {
        cwd: project,
        env: { ...env, LAKESHORE_URL: plane.url, LAKESHORE_TOKEN: token },
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(r.stderr).toBe('');
      expect(r.stdout).toMatch(/tour\s+0\s+0\s+0\s+\d+/);
      expect(r.stdout).toMatch(/^storage: shard DB holds \d+(\.\d)? [KM]B of 10\.0 GB \(submits refused past 9\.0 GB\)$/m);
    });
  });

  it('npx lakeshore --help prints its help and nothing else', () => {
    const r = spawnSync('npx', ['lakeshore', '--help'], { cwd: project, env, encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout).toContain('Usage: lakeshore');
  });

  it('`lakeshore` loads no Node built-in at import time (it runs where only fetch exists), `lakeshore/push` names none at all; `lakeshore/local` is the only way to node:sqlite', () => {
    const dist = join(project, 'node_modules', '@dreamlake', 'lakeshore', 'dist');
    const seen = new Set<string>();
    const staticImports = (file: string): string[] => {
      if (seen.has(file)) return [];
      seen.add(file);
      const src = readFileSync(file, 'utf8');
      const specs = [...src.matchAll(/^\s*(?:import|export)\s[^;]*?from\s*["']([^"']+)["']|^\s*import\s*["']([^"']+)["']/gm)].map(
        (m) => m[1] ?? m[2]!,
      );
      return specs.flatMap((s) => (s.startsWith('.') ? staticImports(join(dirname(file), s)) : [s]));
    };
    const fromRoot = staticImports(join(dist, 'index.js'));
    expect(fromRoot.filter((s) => s.startsWith('node:'))).toEqual([]);
    // lakeshore/local loads node:sqlite itself (client/local/sqlite.ts), to name the Node it needs.
    seen.clear();
    staticImports(join(dist, 'local.js'));
    expect([...seen].some((f) => /import\(\s*["']node:sqlite["']\s*\)/.test(readFileSync(f, 'utf8')))).toBe(true);
    // lakeshore/browser depends on nothing but the page's EventSource and fetch.
    seen.clear();
    expect(staticImports(join(dist, 'browser.js'))).toEqual([]);
    // lakeshore/push names no Node built-in even where it would load one later: a bundler that
    // follows every import (wrangler) finds none, nor tar.
    seen.clear();
    expect(staticImports(join(dist, 'push.js'))).toEqual(['eventsource-parser']);
    const later = [...seen].flatMap((f) => [...readFileSync(f, 'utf8').matchAll(/\bimport\(\s*["']([^"']+)["']/g)].map((m) => m[1]));
    expect(later).toEqual([]);
    expect(readdirSync(join(project, 'node_modules', '@dreamlake', 'lakeshore', 'migrations')).length).toBeGreaterThan(0);
  });

  it('`lakeshore/local` names the Node it needs on an older one, and loads with no warning on Node 22', () => {
    writeFileSync(
      join(project, 'local.mjs'),
      "import { Dispatch } from '@dreamlake/lakeshore/local';\nconst d = new Dispatch(':memory:');\nconsole.log(await d.count('q'));\nawait d.close();\n",
    );
    const major = Number(/^v(\d+)/.exec(nodeVersion)?.[1]);
    if (major < 22) {
      const old = spawnSync(NODE, ['local.mjs'], { cwd: project, env, encoding: 'utf8', timeout: 60_000 });
      expect(old.status).not.toBe(0);
      expect(old.stderr).toContain(`needs Node >= 22.12 (node:sqlite), and this is Node ${nodeVersion.slice(1)}`);
    }
    const r = spawnSync(process.execPath, ['local.mjs'], { cwd: project, env, encoding: 'utf8', timeout: 60_000 });
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('0\n');
  });

  it('typechecks a TypeScript user of `lakeshore` without @types/node', () => {
    writeFileSync(
      join(project, 'use.ts'),
      [
        "import { HttpDispatch, FrameKind, InvocationFailedError, type Claimed } from '@dreamlake/lakeshore';",
        "import { streamJob, type StreamFrame } from '@dreamlake/lakeshore/browser';",
        "import { verifyDelivery, finishLater, type Delivery, type LaterJob } from '@dreamlake/lakeshore/push';",
        "const later = async (h: Headers, body: string): Promise<LaterJob> => finishLater((await verifyDelivery('whsec_x', h, body)) as Delivery);",
        "const stop: () => void = streamJob('http://127.0.0.1:8787/x', { onFrame: (f: StreamFrame) => f.text() });",
        "const d = new HttpDispatch('http://127.0.0.1:8787', { token: 't' });",
        "const c: Claimed | null = await d.claim('q', 'w', { waitMs: 1000 });",
        'const k: number = FrameKind.VALUE;',
        'export { c, k, InvocationFailedError, later, stop };',
      ].join('\n'),
    );
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'es2022',
          module: 'nodenext',
          moduleResolution: 'nodenext',
          strict: true,
          noEmit: true,
          types: [],
          lib: ['es2023', 'dom'],
        },
        files: ['use.ts'],
      }),
    );
    const r = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', project], { encoding: 'utf8' });
    expect(r.stdout + r.stderr).toBe('');
    expect(r.status).toBe(0);
  });
});
