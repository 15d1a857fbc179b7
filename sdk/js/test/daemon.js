// Real agentbox daemons for the tests: `bin/agentbox serve` (AGENTBOX_BIN names another binary)
// on a free loopback port with its own temporary directories, as sdk/python/tests/conftest.py
// starts them. They need root (the nano workers are jailed). When a daemon or a tier cannot run
// here, tests skip and say why, unless AGENTBOX_REQUIRE_PRIVILEGED=1 (CI), where that fails.

import { spawn } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
export const REQUIRE = process.env.AGENTBOX_REQUIRE_PRIVILEGED === '1';
export const KEY = 'js-sdk-test-key';

/** The reason to skip, or a thrown error when CI requires privileged tests to run. */
export function missing(reason) {
  if (REQUIRE) throw new Error(`${reason} (AGENTBOX_REQUIRE_PRIVILEGED=1 turns this skip into a failure)`);
  return reason;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export class Daemon {
  constructor(name, config) {
    this.name = name;
    this.dir = mkdtempSync(join(tmpdir(), `agentbox-js-${name}-`));
    this.config = {
      ...config,
      listen: '127.0.0.1:0',
      artifacts_dir: join(this.dir, 'artifacts'),
      audit: { dir: join(this.dir, 'audit') },
      sessions: { ...(config.sessions ?? {}), dir: join(this.dir, 'sessions') },
      keys_file: join(this.dir, 'keys.json'),
      volumes_dir: join(this.dir, 'volumes'),
      heavy: { ...(config.heavy ?? {}) },
    };
    if (this.config.heavy.enabled !== 'off') this.config.heavy.state_dir = join(this.dir, 'heavy');
    this.log = join(this.dir, 'daemon.log');
    this.url = '';
    this.proc = null;
  }

  async start(timeoutMs = 60000) {
    const cfg = join(this.dir, 'config.json');
    writeFileSync(cfg, JSON.stringify(this.config));
    const bin = process.env.AGENTBOX_BIN || join(REPO, 'bin', 'agentbox');
    const env = { ...process.env, AGENTBOX_API_KEY: KEY };
    delete env.AGENTBOX_LISTEN;
    const fd = openSync(this.log, 'w');
    this.proc = spawn(bin, ['serve', '--config', cfg], { env, stdio: ['ignore', fd, fd] });
    closeSync(fd);
    let exited = null;
    this.proc.on('exit', (code) => { exited = code ?? -1; });
    this.proc.on('error', (err) => { exited = err.message; });
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const m = /listening on (http:\/\/\S+)/.exec(this.tail(200));
      if (m) {
        this.url = m[1];
        break;
      }
      if (exited !== null) throw new Error(`daemon ${this.name} exited (${exited}):\n${this.tail()}`);
      await sleep(50);
    }
    if (!this.url) throw new Error(`daemon ${this.name} did not listen within ${timeoutMs / 1000}s:\n${this.tail()}`);
    while (Date.now() < deadline) {
      try {
        const r = await fetch(this.url + '/v1/health');
        if (r.status === 200) return this;
      } catch { /* not yet */ }
      await sleep(100);
    }
    throw new Error(`daemon ${this.name} not healthy:\n${this.tail()}`);
  }

  async runtimeOk(name) {
    const h = await (await fetch(this.url + '/v1/health')).json();
    return (h.runtimes || []).some((rt) => rt.name === name && rt.ok);
  }

  tail(n = 40) {
    try {
      return readFileSync(this.log, 'utf8').split('\n').slice(-n).join('\n');
    } catch {
      return '';
    }
  }

  async stop() {
    const p = this.proc;
    if (p && p.exitCode === null && p.signalCode === null) {
      const done = new Promise((r) => p.once('exit', r));
      p.kill('SIGTERM');
      const t = setTimeout(() => p.kill('SIGKILL'), 40000);
      await done;
      clearTimeout(t);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Starts a daemon; resolves to {daemon} or {skip: reason}. In CI a daemon that cannot start fails.
 */
export async function startDaemon(name, config) {
  if (process.getuid && process.getuid() !== 0) {
    return { skip: missing('the agentbox daemon needs root (its nano workers are jailed with namespaces)') };
  }
  const d = new Daemon(name, config);
  try {
    await d.start();
  } catch (e) {
    await d.stop();
    return { skip: missing(`cannot start an agentbox daemon: ${e.message}`) };
  }
  return { daemon: d };
}
