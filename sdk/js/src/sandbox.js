// Sandbox: run code, keep state between runs, move files in and out (as the Python SDK's
// agentbox.Sandbox).

import { Client } from './client.js';
import { parseDuration, parseMemory, RUNTIMES } from './config.js';
import { AgentboxError, NotFound } from './errors.js';

/**
 * One handler of a streamed run's events for the run's callbacks, or null when there are none
 * (the run is then not streamed).
 */
function eventHandler({ onStdout, onStderr, onResult, onArtifact }) {
  if (!onStdout && !onStderr && !onResult && !onArtifact) return null;
  return (ev) => {
    if (ev.type === 'stdout') onStdout?.(ev.text ?? '');
    else if (ev.type === 'stderr') onStderr?.(ev.text ?? '');
    else if (ev.type === 'output' && ev.output) onResult?.(ev.output);
    else if (ev.type === 'artifact' && ev.artifact) onArtifact?.(ev.artifact);
    else if (ev.type === 'dropped' && ev.dropped) {
      process.emitWarning(`agentbox: the daemon dropped ${ev.dropped.stdout_bytes} bytes of stdout and ` +
        `${ev.dropped.stderr_bytes} of stderr this client did not read in time; the result has them`);
    }
  };
}

/** Where the code starts in a sandbox, and what relative paths are relative to. */
const WORKDIR = '/home/user';

function inputFiles(files) {
  if (!files) return undefined;
  const list = Array.isArray(files) ? files : Object.entries(files).map(([path, content]) => ({ path, content }));
  if (list.length === 0) return undefined;
  return list.map(({ path, content }) => ({
    path,
    content: (typeof content === 'string' ? Buffer.from(content, 'utf8') : Buffer.from(content)).toString('base64'),
  }));
}

function secondsText(secs) {
  const total = Math.round(secs);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  return [[h, 'h'], [m, 'm'], [s, 's']].filter(([v]) => v).map(([v, u]) => `${v}${u}`).join('') || `${secs}s`;
}

function endedHint(sessionId, idleTimeout) {
  const idle = idleTimeout > 0 ? `idle for ${secondsText(idleTimeout)}` : 'idle past its idle timeout';
  return `session ${sessionId} has ended (closed, ${idle}, or the daemon restarted) and its state is gone; create a new Sandbox`;
}

/**
 * What a Sandbox asks of the daemon, checked when the Sandbox is made. Every field is optional;
 * see SandboxOptions in index.d.ts.
 */
function checkConfig(o) {
  const runtime = o.runtime ?? 'auto';
  if (!RUNTIMES.includes(runtime)) throw new TypeError(`runtime ${JSON.stringify(runtime)}: use one of ${RUNTIMES.join(', ')}`);
  const packages = typeof o.packages === 'string' ? [o.packages] : [...(o.packages ?? [])];
  return {
    runtime,
    packages,
    timeout: parseDuration(o.timeout),
    memoryMb: parseMemory(o.memory),
    env: { ...(o.env ?? {}) },
    image: o.image || undefined,
    network: !!o.network,
    egressProfile: o.egressProfile || undefined,
    volumes: { ...(o.volumes ?? {}) },
    get wantsImage() {
      return this.packages.length > 0 || !!this.image || this.network || Object.keys(this.volumes).length > 0;
    },
  };
}

/**
 * A place to run untrusted Python on an agentbox daemon. By default a session: one interpreter
 * that keeps variables, imports and files from one run to the next, started by the first run
 * (or the first use of `files`) and ended by close(). `stateful: false` makes every run a fresh
 * one-shot sandbox (POST /v1/run).
 */
export class Sandbox {
  #session = null;
  #owned = true;
  #creating = null;
  #closed = false;
  #routing = null;
  #notices = [];

  /** @param {import('../index.d.ts').SandboxOptions} [opts] */
  #options;

  constructor(opts = {}) {
    this.#options = opts;
    this.config = checkConfig(opts);
    this.client = opts.client ?? new Client({ url: opts.url, apiKey: opts.apiKey });
    this.stateful = opts.stateful ?? true;
    this.files = new Files(this);
    this.commands = new Commands(this);
  }

  /**
   * A Sandbox attached to an open session by its id (GET /v1/sessions/{id}), to continue a
   * session another Sandbox (in this process or another) started. Not this Sandbox's own:
   * detach() lets go of it, close() ends it for everyone.
   */
  static async connect(sessionId, opts = {}) {
    if (typeof sessionId !== 'string' || !sessionId) {
      throw new TypeError('agentbox: connect needs the id of an open session, e.g. box.sessionId');
    }
    const box = new Sandbox(opts);
    box.#owned = false;
    try {
      box.#session = await box.client.getSession(sessionId);
    } catch (e) {
      box.#closed = true;
      if (e instanceof NotFound) {
        e.hint = `no open session ${sessionId} at ${box.client.url}: the id is wrong, or the session has ended ` +
          '(closed, idle past its idle timeout, or the daemon restarted); create a new Sandbox';
      }
      throw e;
    }
    return box;
  }

  /** The session as the daemon described it, its runtime kept up to date from each run; null before the first run. */
  get session() { return this.#session; }
  get sessionId() { return this.#session ? this.#session.id : null; }
  /** The session's tier now ("nano" or "heavy"); an auto session can move from nano to heavy. */
  get runtime() { return this.#session ? this.#session.runtime : null; }
  /** Where the latest run of the session went and why, or null. */
  get routing() { return this.#routing; }
  /** What happened to the session between runs, oldest first: a session_moved notice each time its node was gone or drained and another node resumed it (from notice.step). */
  get notices() { return [...this.#notices]; }
  get closed() { return this.#closed; }

  #checkOpen() {
    if (this.#closed) throw new Error('agentbox: this Sandbox is closed');
  }

  /**
   * Runs `code` and returns its Result. An exception in the code is `result.error`; the daemon's
   * refusals and the limits throw AgentboxError subclasses (TimeoutError carries the output so
   * far in `.result`).
   * @param {string} code
   * @param {import('../index.d.ts').RunOptions} [opts]
   */
  async run(code, opts = {}) {
    this.#checkOpen();
    const timeout = opts.timeout !== undefined ? parseDuration(opts.timeout) : this.config.timeout;
    const files = inputFiles(opts.files);
    const onEvent = eventHandler(opts);
    if (!this.stateful) {
      const c = this.config;
      const env = { ...c.env, ...(opts.env ?? {}) };
      const req = {
        code, runtime: c.runtime, timeout, memory_mb: c.memoryMb, env: Object.keys(env).length ? env : undefined,
        files, packages: c.packages.length ? c.packages : undefined, image: c.image,
        network: c.network || undefined, egress_profile: c.egressProfile,
      };
      return onEvent ? this.client.runStream(req, onEvent) : this.client.run(req);
    }
    await this.#ensureSession(false);
    const sid = this.#session.id;
    let res;
    try {
      const req = { code, timeout, env: opts.env, files };
      res = await (onEvent ? this.client.runInSessionStream(sid, req, onEvent) : this.client.runInSession(sid, req));
    } catch (e) {
      if (e instanceof NotFound) this.#lost(sid, e);
      else if (e instanceof AgentboxError && e.result) this.#follow(sid, e.result, e);
      throw e;
    }
    this.#follow(sid, res);
    return res;
  }

  #follow(sid, res, err) {
    const s = this.#session;
    if (!s || s.id !== sid || !res.runtime) return;
    this.#routing = res.routing;
    if (res.notice) {
      this.#notices.push(res.notice);
      const n = res.notice;
      process.emitWarning(`session ${sid} moved from node ${n.from_node ?? '?'} to node ${n.to_node ?? '?'} and resumed from step ${n.step ?? '?'} (${n.reason ?? n.kind})`, { code: 'AGENTBOX_SESSION_MOVED' });
    }
    if (res.runtime === s.runtime) return;
    const before = s.runtime;
    s.runtime = res.runtime;
    if (err) {
      const why = res.routing.reasons.join('; ') || 'the daemon gave no reason';
      const moved = `the session moved from ${before} to ${res.runtime} for this run (${why})`;
      err.hint = err.hint ? `${err.hint}; ${moved}` : moved;
    }
  }

  #lost(sid, e) {
    const s = this.#session;
    let idle = 0;
    if (s && s.id === sid) {
      idle = s.idle_timeout;
      this.#session = null;
      this.#owned = true;
    }
    e.hint = endedHint(sid, idle) + ' (or run again: this Sandbox then starts a new, empty session)';
  }

  /** Calls fn(sessionId), starting the session if need be; a NotFound of a gone session says so. */
  async _sessionCall(fn, forFiles = false) {
    await this.#ensureSession(forFiles);
    const sid = this.#session.id;
    try {
      return await fn(sid);
    } catch (e) {
      if (e instanceof NotFound) {
        try {
          await this.client.getSession(sid);
        } catch (e2) {
          if (e2 instanceof NotFound) this.#lost(sid, e);
        }
      }
      throw e;
    }
  }

  async #ensureSession(forFiles) {
    this.#checkOpen();
    if (this.#session) return;
    // Concurrent first runs share one creation instead of starting a session each.
    if (!this.#creating) {
      const c = this.config;
      let runtime = c.runtime;
      if (runtime === 'auto' && !c.wantsImage && forFiles) {
        runtime = 'heavy';
        this.#routing = { tier: 'heavy', reasons: ['heavy: session files are used before any run'] };
      }
      this.#creating = this.client.createSession({
        runtime, timeout: c.timeout, memory_mb: c.memoryMb, env: Object.keys(c.env).length ? c.env : undefined,
        packages: c.packages.length ? c.packages : undefined, image: c.image, network: c.network || undefined,
        egress_profile: c.egressProfile, volumes: Object.keys(c.volumes).length ? c.volumes : undefined,
      }).then((s) => {
        this.#session = s;
        this.#owned = true;
      }).finally(() => {
        this.#creating = null;
      });
    }
    await this.#creating;
    this.#checkOpen();
  }

  // --- time travel ---------------------------------------------------------------------

  /** The session's steps (each run is one), in the order they ran. */
  async steps() {
    return this._sessionCall(async (sid) => (await this.client.steps(sid)).steps);
  }

  /** Makes the session's variables and files those of `step` (a Step or its id); the next run goes on from there. */
  async rewind(step) {
    const st = typeof step === 'string' ? step : step.id;
    return this._sessionCall((sid) => this.client.rewind(sid, st));
  }

  /** A new Sandbox, on this one's client, whose session starts from `step` (its own: closed with it). */
  async fork(step) {
    const st = typeof step === 'string' ? step : step.id;
    const s = await this._sessionCall((sid) => this.client.fork(sid, st));
    const box = new Sandbox({ ...this.#options, client: this.client });
    box.#session = s;
    return box;
  }

  /** Writes the session's state to disk and frees its sandbox; the next run (or resume) brings it back. */
  async pause() {
    return this._sessionCall((sid) => this.client.pause(sid));
  }

  async resume() {
    return this._sessionCall((sid) => this.client.resume(sid));
  }

  /** The variables and files of `step` (default the session's current one), read in a throwaway
   * copy; `context` names the code context whose variables to show (default the main one). */
  async inspect(step, context) {
    return this._sessionCall(async (sid) => {
      let st = step === undefined || step === null ? undefined : (typeof step === 'string' ? step : step.id);
      if (!st) st = (await this.client.steps(sid)).head;
      return this.client.inspectStep(sid, st, context);
    });
  }

  /** What changed in variables and files from `base` (default the step's parent) to `step`;
   * `context` names the code context whose variables to compare. */
  async diff(step, base, context) {
    const st = typeof step === 'string' ? step : step.id;
    const b = base === undefined || base === null ? undefined : (typeof base === 'string' ? base : base.id);
    return this._sessionCall((sid) => this.client.diffSteps(sid, st, b, context));
  }

  /** Declares an intent: it opens the egress rules the session's profile names for it, for `ttl`. */
  async setIntent(name, ttl) {
    const t = parseDuration(ttl);
    return this._sessionCall((sid) => this.client.setIntent(sid, name, t));
  }

  /** Ends the current intent. */
  async clearIntent() {
    return this._sessionCall((sid) => this.client.clearIntent(sid));
  }

  /**
   * Ends the session (if there is one) and frees what it holds on the daemon. Idempotent. This
   * ends a session attached with connect() too; detach() lets go of one without ending it.
   */
  async close({ keep = false } = {}) {
    this.#closed = true;
    if (this.#creating) await this.#creating.catch(() => {});
    const s = this.#session;
    this.#session = null;
    if (!s) return null;
    try {
      return await this.client.closeSession(s.id, { keep });
    } catch (e) {
      // Expired or closed by the daemon: what a plain close wanted; a kept close kept nothing.
      if (keep || !(e instanceof NotFound)) throw e;
      return null;
    }
  }

  /**
   * Lets go of the session without ending it and returns its id (null if there was none), for
   * Sandbox.connect elsewhere. This Sandbox is closed for use afterwards.
   */
  detach() {
    this.#closed = true;
    const s = this.#session;
    this.#session = null;
    return s ? s.id : null;
  }

  /** `await using box = new Sandbox()` closes the session at the end of the block. */
  async [Symbol.asyncDispose ?? Symbol.for('Symbol.asyncDispose')]() {
    await this.close();
  }
}

/**
 * The files of a Sandbox's session (box.files): heavy sessions only. Paths are absolute inside
 * the sandbox or relative to /home/user, where the code starts.
 */
export class Files {
  #box;

  constructor(box) {
    this.#box = box;
  }

  #call(fn) {
    const box = this.#box;
    if (!box.stateful) return Promise.reject(new Error('agentbox: files need a session; this Sandbox is stateful: false'));
    return box._sessionCall(fn, true);
  }

  /** Writes `data` (a string is UTF-8) to `path`, creating parent directories. */
  write(path, data) {
    return this.#call((sid) => this.#box.client.writeFile(sid, path, data));
  }

  /** The content of the file at `path`. */
  read(path) {
    return this.#call((sid) => this.#box.client.readFile(sid, path));
  }

  async readText(path, encoding = 'utf8') {
    return (await this.read(path)).toString(encoding);
  }

  /**
   * Every file and directory under `path`, recursively, sorted by path. Paths come back as `path`
   * is written: relative to /home/user under a relative path (the default, "."), as write and
   * read take them; absolute under an absolute one.
   */
  async list(path = '.') {
    const files = await this.#call((sid) => this.#box.client.listFiles(sid, path));
    if (path.startsWith('/')) return files;
    for (const f of files) {
      if (f.path === WORKDIR) f.path = '.';
      else if (f.path.startsWith(WORKDIR + '/')) f.path = f.path.slice(WORKDIR.length + 1);
    }
    return files;
  }

  /** Removes a file, or a directory with everything under it. */
  remove(path) {
    return this.#call((sid) => this.#box.client.removeFile(sid, path));
  }
}

/**
 * The shell commands of a Sandbox's session (box.commands): heavy sessions only, beside the
 * interpreter, with its files, environment and way out. Used before any run, they start a
 * heavy session (as files do).
 */
export class Commands {
  #box;

  constructor(box) {
    this.#box = box;
  }

  #call(fn) {
    const box = this.#box;
    if (!box.stateful) return Promise.reject(new Error('agentbox: commands need a session; this Sandbox is stateful: false'));
    return box._sessionCall(fn, true);
  }

  /**
   * Runs `cmd`: a string is a line for /bin/sh -c, an array a program and its arguments.
   * Resolves to the Command once it ended (its status, exit_code, stdout, stderr), or at once
   * with `background: true` (then get, list and kill reach it). onStdout and onStderr stream its
   * output as it writes it.
   */
  run(cmd, opts = {}) {
    const req = {
      ...(Array.isArray(cmd) ? { argv: cmd } : { cmd }),
      cwd: opts.cwd, env: opts.env, stdin: opts.stdin,
      timeout: opts.timeout !== undefined ? parseDuration(opts.timeout) : undefined,
      background: opts.background || undefined,
    };
    const { onStdout, onStderr } = opts;
    const client = this.#box.client;
    if ((onStdout || onStderr) && !opts.background) {
      const onEvent = (ev) => {
        if (ev.type === 'stdout') onStdout?.(ev.text ?? '');
        else if (ev.type === 'stderr') onStderr?.(ev.text ?? '');
      };
      return this.#call((sid) => client.runCommandStream(sid, req, onEvent));
    }
    return this.#call((sid) => client.runCommand(sid, req));
  }

  /** The commands the session keeps, oldest first. */
  list() {
    return this.#call((sid) => this.#box.client.listCommands(sid));
  }

  /** A command's status and output so far. */
  get(id) {
    return this.#call((sid) => this.#box.client.getCommand(sid, id));
  }

  /** Kills a command; resolves to it as it ended. */
  kill(id) {
    return this.#call((sid) => this.#box.client.killCommand(sid, id));
  }
}

/**
 * Runs `code` once in a fresh sandbox (POST /v1/run) and returns its Result.
 * @param {string} code
 * @param {import('../index.d.ts').SandboxOptions & import('../index.d.ts').RunOptions} [opts]
 */
export async function run(code, opts = {}) {
  const box = new Sandbox({ ...opts, stateful: false });
  return box.run(code, opts);
}
