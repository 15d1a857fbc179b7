// The low-level client: one method per operation of api/openapi.yaml. Most programs want
// Sandbox; this is what it is built on. It speaks HTTP/1.1 with node:http through one
// keep-alive agent per client, so many sandboxes share a bounded set of connections.

import http from 'node:http';
import https from 'node:https';
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { DaemonUnreachable, fromResponse, STATUS_OF_CODE } from './errors.js';
import { Artifact, Result } from './models.js';

export const VERSION = '0.1.0';

/** Where `agentbox serve` listens unless told otherwise. */
export const DEFAULT_URL = 'http://127.0.0.1:8420';

/**
 * Every operation the SDK calls, as [method, path] with the spec's {id} placeholders. A Go test
 * (api/sdk_contract_test.go) checks each against api/openapi.yaml.
 */
export const ROUTES = Object.freeze({
  run: ['POST', '/v1/run'],
  route: ['POST', '/v1/route'],
  listSessions: ['GET', '/v1/sessions'],
  createSession: ['POST', '/v1/sessions'],
  getSession: ['GET', '/v1/sessions/{id}'],
  closeSession: ['DELETE', '/v1/sessions/{id}'],
  runInSession: ['POST', '/v1/sessions/{id}/run'],
  listFiles: ['GET', '/v1/sessions/{id}/files'],
  removeFile: ['DELETE', '/v1/sessions/{id}/files'],
  readFile: ['GET', '/v1/sessions/{id}/files/content'],
  writeFile: ['PUT', '/v1/sessions/{id}/files/content'],
  getIntent: ['GET', '/v1/sessions/{id}/intent'],
  setIntent: ['PUT', '/v1/sessions/{id}/intent'],
  clearIntent: ['DELETE', '/v1/sessions/{id}/intent'],
  listSteps: ['GET', '/v1/sessions/{id}/steps'],
  getStep: ['GET', '/v1/sessions/{id}/steps/{step}'],
  inspectStep: ['GET', '/v1/sessions/{id}/steps/{step}/inspect'],
  diffSteps: ['GET', '/v1/sessions/{id}/steps/{step}/diff'],
  rewindSession: ['POST', '/v1/sessions/{id}/rewind'],
  forkSession: ['POST', '/v1/sessions/{id}/fork'],
  pauseSession: ['POST', '/v1/sessions/{id}/pause'],
  resumeSession: ['POST', '/v1/sessions/{id}/resume'],
  runCommand: ['POST', '/v1/sessions/{id}/commands'],
  listCommands: ['GET', '/v1/sessions/{id}/commands'],
  getCommand: ['GET', '/v1/sessions/{id}/commands/{cid}'],
  killCommand: ['DELETE', '/v1/sessions/{id}/commands/{cid}'],
  listVolumes: ['GET', '/v1/volumes'],
  createVolume: ['POST', '/v1/volumes'],
  getVolume: ['GET', '/v1/volumes/{name}'],
  deleteVolume: ['DELETE', '/v1/volumes/{name}'],
  readVolumeFile: ['GET', '/v1/volumes/{name}/files/{path}'],
  writeVolumeFile: ['PUT', '/v1/volumes/{name}/files/{path}'],
  getArtifact: ['GET', '/v1/artifacts/{id}'],
  listImages: ['GET', '/v1/images'],
  health: ['GET', '/v1/health'],
});

/** Seconds a call other than a run may take. */
export const DEFAULT_TIMEOUT = 60;
/** Seconds added to a run's own timeout for the HTTP wait (start, queue, transfer). */
export const RUN_MARGIN = 30;
/** The HTTP wait of a run that names no timeout: the server's default maximum (600 s) plus margin. */
const RUN_TIMEOUT_UNKNOWN = 600 + RUN_MARGIN;
/**
 * Bodies larger than this are sent with `Expect: 100-continue`: the daemon refuses an oversized
 * body by its Content-Length before reading it, and the refusal (413, naming max_body_bytes)
 * reaches the caller instead of a connection reset.
 */
export const EXPECT_CONTINUE_BYTES = 1 << 20;
/** Connections a client keeps open to its daemon at most. */
export const DEFAULT_MAX_CONNECTIONS = 32;

/** The daemon's default data directory: AGENTBOX_DATA_DIR, else $XDG_CACHE_HOME/agentbox or ~/.cache/agentbox. */
export function defaultDataDir() {
  const d = process.env.AGENTBOX_DATA_DIR;
  if (d) return d;
  return join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'agentbox');
}

/** The data directory of a system install; its api_key is readable by the group agentbox. */
export const SYSTEM_DATA_DIR = '/var/lib/agentbox';

/**
 * The key the daemon expects, found as the CLI, the Go client and the Python SDK find it:
 * AGENTBOX_API_KEY, else the api_key file of the user's data directory (a daemon this user
 * started), else /var/lib/agentbox/api_key, else "".
 */
export function apiKeyFromEnv() {
  const k = process.env.AGENTBOX_API_KEY;
  if (k) return k;
  for (const d of [defaultDataDir(), SYSTEM_DATA_DIR]) {
    try {
      const s = readFileSync(join(d, 'api_key'), 'utf8').trim();
      if (s) return s;
    } catch { /* next */ }
  }
  return '';
}

/** AGENTBOX_URL, else DEFAULT_URL. */
export function urlFromEnv() {
  return process.env.AGENTBOX_URL || DEFAULT_URL;
}

function runWait(timeout) {
  return timeout ? timeout + RUN_MARGIN : RUN_TIMEOUT_UNKNOWN;
}

/** Drops undefined and null members, as the daemon's Go types leave out empty optional fields. */
function compact(obj) {
  const out = {};
  for (const [k, v] of Object.entries(obj)) if (v !== undefined && v !== null) out[k] = v;
  return out;
}

/** A client of one agentbox daemon. */
export class Client {
  /**
   * @param {{url?: string, apiKey?: string, timeout?: number, maxConnections?: number}} [opts]
   */
  constructor(opts = {}) {
    const base = (opts.url || urlFromEnv()).replace(/\/+$/, '');
    let u;
    try {
      u = new URL(base);
    } catch {
      u = null;
    }
    if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:') || !u.hostname) {
      throw new TypeError(`agentbox: URL ${JSON.stringify(base)} must be http:// or https:// with a host`);
    }
    this.url = base;
    this.apiKey = opts.apiKey ?? apiKeyFromEnv();
    this.timeout = opts.timeout ?? DEFAULT_TIMEOUT;
    this._base = u;
    this._http = u.protocol === 'https:' ? https : http;
    this._agent = new this._http.Agent({ keepAlive: true, maxSockets: opts.maxConnections ?? DEFAULT_MAX_CONNECTIONS });
  }

  /** Closes the client's idle connections (open ones close when their requests end). */
  close() {
    this._agent.destroy();
  }

  // --- transport ----------------------------------------------------------------------

  _url(op, id, query, cid, name, file, step) {
    const [method, tmpl] = ROUTES[op];
    let path = tmpl;
    if (path.includes('{step}')) {
      if (!step) throw new TypeError(`agentbox: ${op} needs a step`);
      path = path.replace('{step}', encodeURIComponent(step));
    }
    if (path.includes('{name}')) {
      if (!name) throw new TypeError(`agentbox: ${op} needs a volume name`);
      path = path.replace('{name}', encodeURIComponent(name));
    }
    if (path.includes('{path}')) {
      if (!file) throw new TypeError(`agentbox: ${op} needs a path`);
      path = path.replace('{path}', file.replace(/^\/+/, '').split('/').map(encodeURIComponent).join('/'));
    }
    if (path.includes('{id}')) {
      if (!id) throw new TypeError(`agentbox: ${op} needs an id`);
      path = path.replace('{id}', encodeURIComponent(id));
    }
    if (path.includes('{cid}')) {
      if (!cid) throw new TypeError(`agentbox: ${op} needs a command id`);
      path = path.replace('{cid}', encodeURIComponent(cid));
    }
    const u = new URL(this._base.pathname.replace(/\/$/, '') + path, this._base);
    for (const [k, v] of Object.entries(query || {})) u.searchParams.set(k, v);
    return { method, url: u };
  }

  /**
   * One request. Resolves to {status, body, type, requestId} for a status in `ok`; rejects with
   * the error class of the API's code otherwise, or DaemonUnreachable.
   * With `onResponse`, a successful answer is handed over unread (for streams).
   */
  _request(op, { id, cid, name, file, step, query, body, raw, timeout, ok = [200], accept = 'application/json', onResponse } = {}) {
    const { method, url } = this._url(op, id, query, cid, name, file, step);
    const headers = { 'User-Agent': `agentbox-js/${VERSION}`, Accept: accept };
    let payload = null;
    if (body !== undefined) {
      payload = Buffer.from(JSON.stringify(body), 'utf8');
      headers['Content-Type'] = 'application/json';
    } else if (raw !== undefined) {
      payload = Buffer.isBuffer(raw) ? raw : Buffer.from(raw);
      headers['Content-Type'] = 'application/octet-stream';
    }
    if (payload) headers['Content-Length'] = String(payload.length);
    const expect = payload && payload.length > EXPECT_CONTINUE_BYTES;
    if (expect) headers.Expect = '100-continue';
    if (this.apiKey) headers.Authorization = `Bearer ${this.apiKey}`;
    const waitMs = (timeout || this.timeout) * 1000;
    const where = `${method} ${url.origin}${url.pathname}`;

    return new Promise((resolve, reject) => {
      let settled = false;
      const fail = (err) => {
        if (settled) return;
        settled = true;
        req.destroy();
        reject(err);
      };
      const unreachable = (why, cause) => new DaemonUnreachable(null, `${where}: ${why}`, {
        hint: 'is `agentbox serve` running there? AGENTBOX_URL sets the address', cause,
      });
      const req = this._http.request(url, { method, headers, agent: this._agent });
      req.setTimeout(waitMs, () => fail(unreachable(`no answer within ${waitMs / 1000}s`)));
      req.on('error', (err) => fail(unreachable(err.message, err)));
      req.on('response', (res) => {
        const status = res.statusCode;
        const requestId = res.headers['x-request-id'] || '';
        const type = res.headers['content-type'] || '';
        if (ok.includes(status) && onResponse) {
          settled = true;
          resolve(onResponse(res, { status, type, requestId }, req));
          return;
        }
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('error', (err) => fail(unreachable(err.message, err)));
        res.on('end', () => {
          if (settled) return;
          settled = true;
          const data = Buffer.concat(chunks);
          // An answer that came before the body was sent (a refusal of an Expect request)
          // leaves the connection mid-request: it cannot carry another.
          if (expect && !req.writableFinished) req.destroy();
          if (ok.includes(status)) resolve({ status, body: data, type, requestId });
          else reject(fromResponse(status, data, requestId, (w) => new Result(w, this)));
        });
      });
      if (expect) {
        let sent = false;
        const send = () => {
          if (!sent) {
            sent = true;
            req.end(payload);
          }
        };
        req.on('continue', send);
        // A server that ignores Expect gets the body anyway after a short wait (RFC 9110 10.1.1).
        const t = setTimeout(send, 3000);
        req.on('close', () => clearTimeout(t));
        req.flushHeaders();
      } else {
        req.end(payload ?? undefined);
      }
    });
  }

  async _json(op, opts) {
    const { body } = await this._request(op, opts);
    return JSON.parse(body.toString('utf8'));
  }

  // --- runs -----------------------------------------------------------------------------

  /** Runs code once in a fresh sandbox (POST /v1/run). `req` is a RunRequest. */
  async run(req) {
    return new Result(await this._json('run', { body: compact(req), timeout: runWait(req.timeout) }), this);
  }

  /**
   * Runs code once, streamed (POST /v1/run with Accept: application/x-ndjson): `onEvent` is
   * called in order with each StreamEvent as the daemon sends it (stdout and stderr chunks as the
   * code prints them, outputs, artifacts, dropped markers). Resolves to the final Result, or
   * rejects with the error, as run() does.
   */
  async runStream(req, onEvent) {
    return this._stream('run', undefined, req, onEvent);
  }

  /** Runs code in a session's interpreter, streamed as runStream is. */
  async runInSessionStream(id, req, onEvent) {
    return this._stream('runInSession', id, req, onEvent);
  }

  _stream(op, id, req, onEvent, { final = 'result', make = (ev) => new Result(ev.result, this) } = {}) {
    const waitMs = runWait(req.timeout) * 1000;
    return this._request(op, {
      id, body: compact(req), timeout: runWait(req.timeout), accept: 'application/x-ndjson',
      onResponse: (res, { type, requestId }, hreq) => new Promise((resolve, reject) => {
        const where = `${ROUTES[op][0]} ${this.url}${ROUTES[op][1]}`;
        let done = false;
        const finish = (fn, v) => {
          if (!done) {
            done = true;
            fn(v);
          }
        };
        const cut = (why, cause) => finish(reject, new DaemonUnreachable(null, `${where}: ${why}`, {
          hint: 'the daemon stopped or the connection was cut; run the code again', cause,
        }));
        // The wait bounds each read: a run that prints nothing for a while is still within it.
        hreq.setTimeout(waitMs, () => hreq.destroy(new Error(`no answer within ${waitMs / 1000}s`)));
        hreq.on('error', (err) => cut(err.message, err));
        res.on('error', (err) => cut(err.message, err));
        res.on('aborted', () => cut('the stream was cut'));
        res.setEncoding('utf8');
        let buf = '';
        if (type.startsWith('application/json')) {
          // A daemon that does not stream answered with the whole result.
          res.on('data', (c) => { buf += c; });
          res.on('end', () => finish(resolve, final === 'result' ? new Result(JSON.parse(buf), this) : JSON.parse(buf)));
          return;
        }
        const handle = (ev) => {
          if (ev.type === final && ev[final === 'exit' ? 'command' : 'result']) {
            finish(resolve, make(ev));
            return;
          }
          if (ev.type === 'error') {
            const code = ev.error?.code || 'internal';
            const body = Buffer.from(JSON.stringify({ error: ev.error, result: ev.result ?? null }));
            finish(reject, fromResponse(STATUS_OF_CODE[code] ?? 500, body, requestId, (w) => new Result(w, this)));
            return;
          }
          if (ev.artifact) ev.artifact = new Artifact(ev.artifact, this);
          if (onEvent) onEvent(ev);
        };
        res.on('data', (chunk) => {
          buf += chunk;
          for (let i; !done && (i = buf.indexOf('\n')) >= 0;) {
            const line = buf.slice(0, i);
            buf = buf.slice(i + 1);
            if (!line.trim()) continue;
            try {
              handle(JSON.parse(line));
            } catch (err) {
              // A callback that throws ends the run's stream; its error is the caller's.
              finish(reject, err);
              hreq.destroy();
            }
          }
        });
        res.on('end', () => cut('the stream ended without a result'));
      }),
    });
  }

  // --- time travel (steps) ---------------------------------------------------------------

  /** A session's steps, in the order they ran, and its head: {head, steps}. */
  async steps(id) {
    return this._json('listSteps', { id });
  }

  async step(id, step) {
    return this._json('getStep', { id, step });
  }

  /** The variables and files a step held, read in a throwaway copy of it; `context` names one of
   * the session's code contexts (default the main one). */
  async inspectStep(id, step, context) {
    return this._json('inspectStep', { id, step, query: context ? { context } : undefined, timeout: Math.max(this.timeout, 60) });
  }

  /** What changed from `base` (default the step's parent) to `step`; `context` names the code
   * context whose variables are compared (default the main one). */
  async diffSteps(id, step, base, context) {
    const query = {};
    if (base) query.base = base;
    if (context) query.context = context;
    return this._json('diffSteps', { id, step, query: Object.keys(query).length ? query : undefined, timeout: Math.max(this.timeout, 60) });
  }

  /** Makes a session's state that of one of its steps. */
  async rewind(id, step) {
    return this._json('rewindSession', { id, body: { step } });
  }

  /** Starts a new session from one of a session's steps. */
  async fork(id, step) {
    return this._json('forkSession', { id, body: { step }, ok: [201], timeout: Math.max(this.timeout, 120) });
  }

  /** Writes a session's state to disk and frees its sandbox. */
  async pause(id) {
    return this._json('pauseSession', { id, timeout: Math.max(this.timeout, 120) });
  }

  /** Brings a paused session back ahead of its next run. */
  async resume(id) {
    return this._json('resumeSession', { id, timeout: Math.max(this.timeout, 120) });
  }

  // --- commands (heavy sessions) --------------------------------------------------------

  /**
   * Runs a shell command in a heavy session (POST /v1/sessions/{id}/commands): `req` is a
   * CommandRequest (argv or cmd). In the foreground it resolves to the Command once it ended;
   * with `background` at once, to the running Command.
   */
  async runCommand(id, req) {
    const wait = req.background ? this.timeout : runWait(req.timeout);
    return this._json('runCommand', { id, body: compact(req), ok: [200, 202], timeout: wait });
  }

  /** runCommand streamed: onEvent gets its stdout and stderr chunks; resolves to the ended Command. */
  async runCommandStream(id, req, onEvent) {
    return this._stream('runCommand', id, req, onEvent, { final: 'exit', make: (ev) => ev.command });
  }

  /** The commands a session keeps, oldest first, with their output so far. */
  async listCommands(id) {
    return (await this._json('listCommands', { id })).commands;
  }

  /** A command's status and output so far (readable while it runs). */
  async getCommand(id, cid) {
    return this._json('getCommand', { id, cid });
  }

  /** Kills a command (its process group); resolves to the command as it ended. */
  async killCommand(id, cid) {
    return this._json('killCommand', { id, cid });
  }

  /** Where the daemon would run `req`, without running it (POST /v1/route): {tier, reasons}. */
  async route(req) {
    return this._json('route', { body: compact(req) });
  }

  /** Downloads an artifact: {data, mime} (GET /v1/artifacts/{id}). */
  async artifact(id) {
    const { body, type } = await this._request('getArtifact', { id, accept: '*/*' });
    return { data: body, mime: type };
  }

  // --- sessions -------------------------------------------------------------------------

  /** Starts a stateful session (POST /v1/sessions). */
  async createSession(req = {}) {
    return this._json('createSession', { body: compact(req), ok: [201], timeout: Math.max(this.timeout, 120) });
  }

  async getSession(id) {
    return this._json('getSession', { id });
  }

  /** Open sessions, oldest first. */
  async listSessions() {
    return (await this._json('listSessions', {})).sessions;
  }

  /**
   * Closes a session (DELETE /v1/sessions/{id}); a run in progress is stopped. With
   * `{ keep: true }` the daemon writes a durable snapshot first and keeps the session's state and
   * steps until the returned session's `kept_until`: resume() or a run brings it back, fork()
   * starts a new session from any of its steps. Without keep it resolves to null.
   */
  async closeSession(id, { keep = false } = {}) {
    if (keep) {
      return this._json('closeSession', { id, query: { keep: 'true' }, timeout: Math.max(this.timeout, 120) });
    }
    await this._request('closeSession', { id, ok: [204] });
    return null;
  }

  /** Runs code in a session's interpreter (POST /v1/sessions/{id}/run). */
  async runInSession(id, req) {
    return new Result(await this._json('runInSession', { id, body: compact(req), timeout: runWait(req.timeout) }), this);
  }

  // --- session files (heavy sessions) ---------------------------------------------------

  /** Everything under `path` in a session, recursively, sorted by path. */
  async listFiles(id, path = '/home/user') {
    return (await this._json('listFiles', { id, query: { path } })).files;
  }

  async readFile(id, path) {
    return (await this._request('readFile', { id, query: { path }, accept: '*/*' })).body;
  }

  /** Uploads `data` (string as UTF-8, or bytes) to `path`, creating parent directories. */
  async writeFile(id, path, data) {
    const raw = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data);
    await this._request('writeFile', { id, query: { path }, raw, ok: [204] });
  }

  /** Removes a file, or a directory with everything under it. */
  async removeFile(id, path) {
    await this._request('removeFile', { id, query: { path }, ok: [204] });
  }

  // --- egress intents -------------------------------------------------------------------

  async setIntent(id, name, ttl) {
    return this._json('setIntent', { id, body: compact({ name, ttl }) });
  }

  async clearIntent(id) {
    await this._request('clearIntent', { id, ok: [204] });
  }

  async getIntent(id) {
    return this._json('getIntent', { id });
  }

  // --- volumes ------------------------------------------------------------------------------

  /** Makes a named volume (POST /v1/volumes) of `quotaBytes` (default the daemon's, 256 MiB). */
  async createVolume(name, quotaBytes) {
    return this._json('createVolume', { body: compact({ name, quota_bytes: quotaBytes }), ok: [201] });
  }

  /** The volumes of the caller's tenant, by name. */
  async listVolumes() {
    return (await this._json('listVolumes', {})).volumes;
  }

  async getVolume(name) {
    return this._json('getVolume', { name });
  }

  /** Removes a volume and what it holds; a mounted one is a Conflict. */
  async deleteVolume(name) {
    await this._request('deleteVolume', { name, ok: [204] });
  }

  /** A file of a volume, without a session. */
  async readVolumeFile(name, path) {
    return (await this._request('readVolumeFile', { name, file: path, accept: '*/*' })).body;
  }

  /** Writes a file into a volume, without a session (parent directories are made). */
  async writeVolumeFile(name, path, data) {
    const raw = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data);
    await this._request('writeVolumeFile', { name, file: path, raw, ok: [204] });
  }

  // --- operations -----------------------------------------------------------------------

  /** The heavy tier's images, the default first, with the packages each offers. */
  async images() {
    return (await this._json('listImages', {})).images;
  }

  /** The daemon's version and each runtime's state. Needs no key; a 503 still returns Health. */
  async health() {
    return this._json('health', { ok: [200, 503] });
  }
}
