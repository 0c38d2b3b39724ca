/**
 * `npm start` tells the truth and cleans up after itself: a second start on a taken port says what
 * holds it and starts nothing; a hangup (the terminal closed) or the starter's death leaves no
 * server or workerd behind.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../scripts/plane.mjs';
import { allExited, descendants, killGroup } from '../support/processes.ts';
import { tempDir } from '../support/tmp.ts';
import { until } from '../support/wait.ts';

const ROOT = resolve(import.meta.dirname, '..', '..');

interface Started {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  exited: Promise<number | null>;
}

/** `npm start -- --port N` as a terminal runs it: a process group of its own, fresh state. */
function npmStart(port: number, state: string): Started {
  const child = spawn(process.execPath, [join(ROOT, 'scripts', 'run.mjs'), 'dev', '--port', String(port)], {
    cwd: ROOT,
    env: { ...process.env, LAKESHORE_STATE: state },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return { child, out: () => out, err: () => err, exited };
}

describe('npm start', () => {
  it('refuses a port a plane already holds, before printing a banner, and leaves nothing behind after SIGHUP', async () => {
    const port = await freePort();
    const first = npmStart(port, tempDir('lakeshore-start-'));
    try {
      await until(() => first.out().includes('Ctrl-C stops it'), 'the first plane to be up', 90_000, 50);
      // One URL in what it printed, the plane's own.
      expect(
        first
          .out()
          .match(/http:\/\/127\.0\.0\.1:\d+/g)
          ?.every((u) => u === `http://127.0.0.1:${port}`),
      ).toBe(true);
      expect(first.out() + first.err()).not.toMatch(/\[mf:info\]|Using secrets|npm warn/);

      const second = npmStart(port, tempDir('lakeshore-start-'));
      expect(await second.exited).toBe(1);
      expect(second.err()).toContain(`a lakeshore plane already answers at http://127.0.0.1:${port}`);
      expect(second.err()).toContain(`--port ${port + 1}`);
      expect(second.out()).not.toContain('is up');

      const tree = descendants(first.child.pid!);
      expect(tree.some((p) => p.cmd.includes('serve.mjs'))).toBe(true);
      expect(tree.some((p) => p.cmd.includes('workerd'))).toBe(true);
      process.kill(-first.child.pid!, 'SIGHUP'); // the terminal closed: its foreground group hangs up
      await until(() => allExited([first.child.pid!, ...tree.map((p) => p.pid)]), 'every process of the plane to exit', 15_000, 50);
    } finally {
      killGroup(first.child.pid);
    }
  }, 150_000);

  it('`kill PID` of npm start, or the death of whatever started it, leaves no server or workerd behind', async () => {
    // `kill PID` sends SIGTERM to that one process: the task it runs must stop its plane too.
    const port = await freePort();
    const first = npmStart(port, tempDir('lakeshore-start-'));
    await until(() => first.out().includes('Ctrl-C stops it'), 'the plane to be up', 90_000, 50);
    const tree = descendants(first.child.pid!);
    expect(tree.some((p) => p.cmd.includes('workerd'))).toBe(true);
    process.kill(first.child.pid!, 'SIGTERM');
    try {
      await until(() => allExited([first.child.pid!, ...tree.map((p) => p.pid)]), 'every process of the plane to exit', 15_000, 50);
    } finally {
      killGroup(first.child.pid);
    }

    // npm itself passes no SIGTERM on: when the process above the task dies (here killed outright),
    // the task notices and stops its plane.
    const port2 = await freePort();
    const starter = spawn(
      process.execPath,
      [
        '-e',
        `require('node:child_process').spawn(process.execPath, [${JSON.stringify(join(ROOT, 'scripts', 'run.mjs'))}, 'dev', '--port', '${port2}'], { stdio: 'inherit' }); setInterval(() => {}, 1e9);`,
      ],
      {
        cwd: ROOT,
        env: { ...process.env, LAKESHORE_STATE: tempDir('lakeshore-start-') },
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      },
    );
    let out = '';
    starter.stdout!.on('data', (d) => (out += d));
    try {
      await until(() => out.includes('Ctrl-C stops it'), 'the second plane to be up', 90_000, 50);
      const tree2 = descendants(starter.pid!);
      expect(tree2.some((p) => p.cmd.includes('workerd'))).toBe(true);
      process.kill(starter.pid!, 'SIGKILL');
      await until(() => allExited(tree2.map((p) => p.pid)), 'every process of the plane to exit after its starter died', 15_000, 50);
    } finally {
      killGroup(starter.pid);
    }
  }, 200_000);

  it('a plane whose starter was killed outright stops too', async () => {
    const port = await freePort();
    const first = npmStart(port, tempDir('lakeshore-start-'));
    await until(() => first.out().includes('Ctrl-C stops it'), 'the plane to be up', 90_000, 50);
    const tree = descendants(first.child.pid!);
    const dev = tree.find((p) => p.cmd.includes('dev.mjs'))!;
    expect(dev).toBeDefined();
    process.kill(dev.pid, 'SIGKILL'); // no handler runs: the server must notice on its own
    await until(() => allExited(tree.map((p) => p.pid).filter((p) => p !== first.child.pid)), 'the server and workerd to exit', 15_000, 50);
    killGroup(first.child.pid);
  }, 150_000);
});
