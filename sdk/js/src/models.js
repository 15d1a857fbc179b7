// The SDK's view of the API's results. Wire types keep the API's member names (exit_code,
// stdout_truncated...), as the Python SDK does, so a field reads the same in the spec, in
// Python and here; a Go test (api/sdk_contract_test.go) checks index.d.ts against the spec.
// File contents are Buffers here (base64 on the wire); times stay RFC 3339 strings.

import { createHash } from 'node:crypto';
import { writeFile, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { inspect } from 'node:util';
import { AgentboxError, CodeError } from './errors.js';

/** How many characters of stdout, stderr or a file's content inspect() shows. */
const INSPECT_TEXT = 200;

function clip(s) {
  return typeof s === 'string' && s.length > INSPECT_TEXT ? s.slice(0, INSPECT_TEXT) + `… (${s.length} chars)` : s;
}

/** Something a run made besides output and files, e.g. a matplotlib figure as PNG. */
export class Artifact {
  #client;
  #content = null;

  constructor(wire, client) {
    this.id = wire.id ?? '';
    this.name = wire.name ?? '';
    this.mime = wire.mime ?? '';
    this.size = wire.size ?? 0;
    this.sha256 = wire.sha256 ?? '';
    if (wire.chart) this.chart = wire.chart;
    this.#client = client;
  }

  /** Downloads the content (GET /v1/artifacts/{id}) once, checking it against sha256. */
  async read() {
    if (this.#content === null) {
      if (!this.#client) throw new Error(`artifact ${this.id} is not bound to a client; use client.artifact(id)`);
      const { data } = await this.#client.artifact(this.id);
      if (this.sha256 && createHash('sha256').update(data).digest('hex') !== this.sha256.toLowerCase()) {
        throw new AgentboxError(null, `artifact ${this.id}: the download does not match its sha256`, {
          hint: "download it again; if it keeps failing, the daemon's artifact store is damaged",
        });
      }
      this.#content = data;
    }
    return this.#content;
  }

  /** Downloads the artifact and writes it to `path` (a directory keeps its own name); returns the path. */
  async save(path) {
    let p = path;
    try {
      if ((await stat(p)).isDirectory()) p = join(p, basename(this.name) || this.id);
    } catch { /* a new file */ }
    await writeFile(p, await this.read());
    return p;
  }
}

/** A file the code created or changed. */
export class OutputFile {
  constructor(wire) {
    this.path = wire.path ?? '';
    this.content = Buffer.from(wire.content ?? '', 'base64');
    this.size = wire.size ?? this.content.length;
  }

  /** Writes the content to `path` on this machine; returns the path. */
  async save(path) {
    await writeFile(path, this.content);
    return path;
  }

  [inspect.custom]() {
    return `OutputFile { path: ${inspect(this.path)}, size: ${this.size} }`;
  }
}

/** What a run produced. A Python exception in the code is `error`, not a thrown error. */
export class Result {
  constructor(wire, client) {
    // Members this SDK does not know yet (a newer daemon's) are kept as they came.
    Object.assign(this, wire);
    this.stdout = wire.stdout ?? '';
    this.stderr = wire.stderr ?? '';
    this.exit_code = wire.exit_code ?? 0;
    this.error = wire.error ?? null;
    this.runtime = wire.runtime ?? '';
    this.routing = { tier: wire.routing?.tier ?? '', reasons: wire.routing?.reasons ?? [] };
    this.stdout_truncated = !!wire.stdout_truncated;
    this.stderr_truncated = !!wire.stderr_truncated;
    this.files = (wire.files ?? []).map((f) => new OutputFile(f));
    this.artifacts = (wire.artifacts ?? []).map((a) => new Artifact(a, client));
    this.outputs = wire.outputs ?? [];
    this.timings = wire.timings ?? { queue_ms: 0, start_ms: 0, execute_ms: 0, total_ms: 0, pool: '' };
    if (wire.step !== undefined) this.step = wire.step;
  }

  /** True when the code ran to the end without an exception and exited 0. */
  get ok() {
    return !this.error && this.exit_code === 0;
  }

  /** Rich values the run displayed (the API's outputs). */
  get results() {
    return this.outputs;
  }

  /** Seconds the run took inside the daemon (timings.total_ms). */
  get duration() {
    return (this.timings.total_ms || 0) / 1000;
  }

  /** Throws CodeError if the code raised or exited non-zero; else returns this. */
  raiseForError() {
    if (!this.ok) throw new CodeError(this);
    return this;
  }

  // Printing a result shows what it holds, not whole files and outputs.
  [inspect.custom](depth, options) {
    const o = {
      stdout: clip(this.stdout), stderr: clip(this.stderr), exit_code: this.exit_code,
      error: this.error ? `${this.error.name}: ${this.error.value}` : null, runtime: this.runtime,
      routing: this.routing,
      files: this.files.map((f) => `${f.path} (${f.size} bytes)`),
      artifacts: this.artifacts.map((a) => `${a.name} (${a.mime}, ${a.size} bytes, id ${a.id})`),
      outputs: this.outputs.length, duration: this.duration,
    };
    return `Result ${inspect(o, { ...options, depth: 2 })}`;
  }
}
