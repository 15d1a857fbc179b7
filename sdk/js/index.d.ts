// Types of the agentbox JavaScript SDK (hand-written; the code is plain ES modules in src/).
//
// The wire types (RunRequest, Result, Session...) keep the API's member names, as in
// api/openapi.yaml and the Python SDK. A Go test (api/sdk_contract_test.go) reads every
// `interface` and `class` here that is named after a schema of the spec and checks that its
// properties are exactly the schema's: keep one member per line, and no braces inside a type
// (use Record<...> or a named type).

/// <reference types="node" />

// --- requests --------------------------------------------------------------------------

/** A file written into the sandbox before the code starts. */
export interface InputFile {
  /** Absolute inside the sandbox, or relative to /home/user. ".." is refused. */
  path: string;
  /** The content: a string is sent as UTF-8 (base64 on the wire). */
  content: string | Uint8Array;
}

/** Fixes the clock and the random source so the same request gives the same output. */
export interface Deterministic {
  /** RFC 3339 time the wall clock reads at the start; default 1970-01-01T00:00:00Z. */
  time?: string;
  seed?: number;
}

/** Body of POST /v1/run and POST /v1/sessions/{id}/run; undefined means the server's default. */
export interface RunRequest {
  code: string;
  /** "auto" (default), "nano" or "heavy". */
  runtime?: Runtime;
  /** Seconds (fractions allowed). */
  timeout?: number;
  memory_mb?: number;
  stdout_limit?: number;
  stderr_limit?: number;
  files_limit?: number;
  files?: InputFile[];
  env?: Record<string, string>;
  deterministic?: Deterministic;
  packages?: string[];
  image?: string;
  network?: boolean;
  egress_profile?: string;
}

/** Body of POST /v1/sessions. */
export interface CreateSessionRequest {
  runtime?: Runtime;
  timeout?: number;
  memory_mb?: number;
  stdout_limit?: number;
  stderr_limit?: number;
  files_limit?: number;
  env?: Record<string, string>;
  packages?: string[];
  image?: string;
  network?: boolean;
  egress_profile?: string;
  /** Volumes to mount by name at absolute paths ("/mnt/data", or "/mnt/data:ro"); heavy only. */
  volumes?: Record<string, string>;
}

/** Body of PUT /v1/sessions/{id}/intent. */
export interface SetIntentRequest {
  name: string;
  /** Seconds; undefined means the intent's maximum. */
  ttl?: number;
}

/** A session's current intent; name is "" when it has none. */
export interface Intent {
  name: string;
  expires_at: string | null;
}

export type Runtime = 'auto' | 'nano' | 'heavy';

// --- results ---------------------------------------------------------------------------

/** An exception raised by the user's code: not an API error, the run itself succeeded. */
export interface PyError {
  name: string;
  value: string;
  traceback: string;
}

/** Which tier ran the code and why, written for people. */
export interface Routing {
  tier: string;
  reasons: string[];
}

/** A file the code created or changed. */
export declare class OutputFile {
  /** Absolute inside the sandbox. */
  path: string;
  content: Buffer;
  size: number;
  save(path: string): Promise<string>;
}

/** Something a run made besides output and files, e.g. a matplotlib figure as PNG. */
export declare class Artifact {
  id: string;
  /** e.g. "figure-1.png". */
  name: string;
  /** e.g. "image/png". */
  mime: string;
  size: number;
  /** Hex-encoded sha256 of the content. */
  sha256: string;
  /**
   * For a matplotlib figure (heavy tier): what it shows, read from its axes, as E2B's result
   * `chart` (type, title, axes and elements; `truncated: true` when cut to its bounds).
   */
  chart?: { type: string; title: string; elements: unknown[]; truncated?: boolean; [key: string]: unknown };
  /** Downloads the content once (GET /v1/artifacts/{id}), checked against sha256. */
  read(): Promise<Buffer>;
  /** Downloads and writes it to `path` (a directory keeps the artifact's name); resolves to the path. */
  save(path: string): Promise<string>;
}

/** A rich value the run displayed; html and json when the value offers them. */
export interface Output {
  text: string;
  html?: string;
  json?: unknown;
}

/** Where the time went, in milliseconds. */
export interface Timings {
  queue_ms: number;
  start_ms: number;
  execute_ms: number;
  total_ms: number;
  /** "warm" or "cold". */
  pool: string;
}

/** What a run produced. */
export declare class Result {
  stdout: string;
  stderr: string;
  /** 0 when the code ran to the end, 1 after an uncaught exception, else sys.exit's argument. */
  exit_code: number;
  error: PyError | null;
  /** "nano" or "heavy". */
  runtime: string;
  routing: Routing;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  files: OutputFile[];
  artifacts: Artifact[];
  outputs: Output[];
  timings: Timings;
  /** The session step this run made; absent for one-shot runs. */
  step?: string;
  /** Present once, on the first run after the session moved to another node (Sandbox.notices). */
  notice?: Notice;
  /** True when the code ran to the end without an exception and exited 0. */
  get ok(): boolean;
  /** The API's outputs. */
  get results(): Output[];
  /** Seconds the run took inside the daemon. */
  get duration(): number;
  /** Throws CodeError if the code raised or exited non-zero. */
  raiseForError(): this;
}

// --- sessions, files, operations -------------------------------------------------------

/** A session's effective limits. */
export interface Limits {
  timeout: number;
  memory_mb: number;
  stdout_limit: number;
  stderr_limit: number;
  files_limit: number;
}

/** An open session. */
export interface Session {
  id: string;
  /** The tier the session runs on now. */
  runtime: string;
  limits: Limits;
  created_at: string;
  last_used: string;
  runs: number;
  /** Seconds the session may stay unused before the daemon closes it. */
  idle_timeout: number;
  network: boolean;
  egress_profile?: string;
  /** "live" or "paused". */
  state: string;
  /** The step whose state the session holds. */
  head?: string;
  /** How many steps (runs) the session has. */
  steps: number;
  /** "session/step" for a session forked from another's step. */
  forked_from?: string;
  /** Set for a session closed with `keep`: it is paused, its state and steps kept until then. */
  kept_until?: string;
}

export interface SessionList {
  sessions: Session[];
}

/** A file or directory of a session. */
export interface FileInfo {
  path: string;
  size: number;
  dir: boolean;
  mod_time: string;
}

export interface FileList {
  files: FileInfo[];
}

/** A heavy image the daemon can run, and the Python packages it offers. */
export interface Image {
  name: string;
  hash: string;
  default: boolean;
  python: string;
  packages: Record<string, string>;
  size_bytes: number;
  built: string;
}

export interface ImageList {
  images: Image[];
}

export interface RuntimeHealth {
  name: string;
  ok: boolean;
  state: string;
}

export interface Health {
  /** "ok", "degraded" or "unavailable". */
  status: string;
  version: string;
  runtimes: RuntimeHealth[];
}

export interface ErrorDetail {
  code: string;
  message: string;
  hint: string;
}

export interface ErrorResponse {
  error: ErrorDetail;
  result?: Result;
}

/** A command to run in a heavy session (POST /v1/sessions/{id}/commands): argv or cmd. */
export interface CommandRequest {
  argv?: string[];
  cmd?: string;
  cwd?: string;
  env?: Record<string, string>;
  stdin?: string;
  timeout?: number;
  background?: boolean;
}

/** A command of a session: running or how it ended, with its output so far. */
export interface Command {
  id: string;
  session: string;
  argv: string[];
  cwd: string;
  status: "running" | "exited" | "killed" | "timeout" | "failed";
  exit_code: number;
  stdout: string;
  stderr: string;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  started_at: string;
  ended_at?: string;
  duration_ms: number;
  error?: string;
}

export interface CommandList {
  commands: Command[];
}

/** Bytes of stream chunks the daemon dropped because the client read too slowly (the result has them). */
export interface StreamDropped {
  stdout_bytes: number;
  stderr_bytes: number;
}

/**
 * One event of a streamed run (Accept: text/event-stream or application/x-ndjson): stdout and
 * stderr carry text; output, artifact and dropped their object; the last event is result (the
 * whole result) or error (error and the partial result).
 */
/**
 * What happened to a session since its last answer, given once. "session_moved": its node was
 * gone or drained and another node resumed it from its latest durable step (`step`).
 */
export interface Notice {
  kind: "session_moved";
  from_node?: string;
  to_node?: string;
  /** The step the session resumed from; runs after it, if any, were lost with the node. */
  step?: string;
  reason?: string;
}

export interface StreamEvent {
  type: "stdout" | "stderr" | "output" | "artifact" | "dropped" | "result" | "error" | "exit" | "notice";
  text?: string;
  output?: Output;
  artifact?: Artifact;
  dropped?: StreamDropped;
  result?: Result;
  error?: ErrorDetail;
  command?: Command;
  /** The first event when the session moved since its last answer (type "notice"). */
  notice?: Notice;
}

/** How a step's snapshot stands: pending, durable, failed, or dropped (with a reason). */
export interface StepSnapshot {
  state: string;
  reason?: string;
  /** What the snapshot leaves out (heavy: threads the code left running). */
  note?: string;
  bytes: number;
  took_ms: number;
  durable_ms: number;
}

/** One run of a session: what it ran and printed, and the snapshot of the state after it. */
export interface Step {
  id: string;
  /** The step the session was at when it ran (absent for the first). */
  parent?: string;
  session: string;
  seq: number;
  runtime: string;
  code: string;
  /** The code context the run ran in (absent: the main one); inspect and diff take it. */
  context?: string;
  stdout: string;
  stderr: string;
  truncated: boolean;
  exit_code: number;
  error: PyError | null;
  error_code?: string;
  artifacts: Artifact[];
  /** The rich values the run displayed (a DataFrame's text, HTML and JSON). */
  outputs?: Output[];
  /** The ids (`seq`) of the audit records written for the session while the step ran. */
  audit_records?: number[];
  started: string;
  duration_ms: number;
  snapshot: StepSnapshot;
}

export interface StepList {
  /** The step whose state the session holds. */
  head: string;
  steps: Step[];
}

/** Body of rewind and fork. */
export interface StepRequest {
  step: string;
}

/** A variable of a step, as inspect reads it. */
export interface Variable {
  name: string;
  type: string;
  size: number;
  repr?: string;
  shape?: number[];
  dtypes?: Record<string, string>;
  head?: string;
}

export interface InspectedFile {
  path: string;
  size: number;
  sha256?: string;
}

export interface StepInspection {
  step: string;
  /** The code context whose variables these are; absent for the main one. */
  context?: string;
  variables: Variable[];
  files: InspectedFile[];
  truncated: boolean;
  took_ms: number;
}

export interface StepDiff {
  base: string;
  step: string;
  added: Variable[];
  removed: Variable[];
  changed: Variable[];
  files_added: InspectedFile[];
  files_removed: InspectedFile[];
  files_changed: InspectedFile[];
}

/** A named volume: files that outlive sessions, mounted into heavy sessions. */
export interface Volume {
  name: string;
  /** Its size; its file system's own metadata takes a few percent of it. */
  quota_bytes: number;
  created_at: string;
  /** Sessions that mount it read-write now (0 or 1). */
  mounted_rw: number;
  /** Sessions that mount it read-only now. */
  mounted_ro: number;
}

export interface VolumeList {
  volumes: Volume[];
}

/** Body of POST /v1/volumes. */
export interface CreateVolumeRequest {
  name: string;
  /** At least 1 MiB; default 256 MiB. */
  quota_bytes?: number;
}

// --- the client ------------------------------------------------------------------------

export declare const VERSION: string;
export declare const DEFAULT_URL: string;
/** Bodies larger than this many bytes are sent with `Expect: 100-continue`. */
export declare const EXPECT_CONTINUE_BYTES: number;
/** Every operation the SDK calls: [method, path]. */
export declare const ROUTES: Readonly<Record<string, readonly [string, string]>>;
/** AGENTBOX_API_KEY, else the api_key file of the data directory, else /var/lib/agentbox/api_key, else "". */
export declare function apiKeyFromEnv(): string;
/** AGENTBOX_URL, else DEFAULT_URL. */
export declare function urlFromEnv(): string;
/** AGENTBOX_DATA_DIR, else $XDG_CACHE_HOME/agentbox or ~/.cache/agentbox. */
export declare function defaultDataDir(): string;

export interface ClientOptions {
  /** Default AGENTBOX_URL, else http://127.0.0.1:8420. */
  url?: string;
  /** Default AGENTBOX_API_KEY, else the daemon's api_key file. */
  apiKey?: string;
  /** Seconds a call other than a run may take (default 60). */
  timeout?: number;
  /** Connections kept to the daemon at most (default 32); more requests wait for one. */
  maxConnections?: number;
}

/** The low-level client: one method per operation of the API. */
export declare class Client {
  constructor(opts?: ClientOptions);
  readonly url: string;
  apiKey: string;
  timeout: number;
  run(req: RunRequest): Promise<Result>;
  route(req: RunRequest): Promise<Routing>;
  artifact(id: string): Promise<{ data: Buffer; mime: string }>;
  createSession(req?: CreateSessionRequest): Promise<Session>;
  getSession(id: string): Promise<Session>;
  listSessions(): Promise<Session[]>;
  /** With `keep`, the session's state and steps are kept (a durable snapshot) and it is returned. */
  closeSession(id: string, opts?: { keep?: boolean }): Promise<Session | null>;
  runInSession(id: string, req: RunRequest): Promise<Result>;
  /** POST /v1/run streamed (NDJSON): onEvent gets each event before the final Result. */
  runStream(req: RunRequest, onEvent?: (ev: StreamEvent) => void): Promise<Result>;
  runInSessionStream(id: string, req: RunRequest, onEvent?: (ev: StreamEvent) => void): Promise<Result>;
  listFiles(id: string, path?: string): Promise<FileInfo[]>;
  readFile(id: string, path: string): Promise<Buffer>;
  writeFile(id: string, path: string, data: string | Uint8Array): Promise<void>;
  removeFile(id: string, path: string): Promise<void>;
  setIntent(id: string, name: string, ttl?: number): Promise<Intent>;
  clearIntent(id: string): Promise<void>;
  getIntent(id: string): Promise<Intent>;
  steps(id: string): Promise<StepList>;
  step(id: string, step: string): Promise<Step>;
  inspectStep(id: string, step: string, context?: string): Promise<StepInspection>;
  diffSteps(id: string, step: string, base?: string, context?: string): Promise<StepDiff>;
  rewind(id: string, step: string): Promise<Session>;
  fork(id: string, step: string): Promise<Session>;
  pause(id: string): Promise<Session>;
  resume(id: string): Promise<Session>;
  runCommand(id: string, req: CommandRequest): Promise<Command>;
  runCommandStream(id: string, req: CommandRequest, onEvent?: (ev: StreamEvent) => void): Promise<Command>;
  listCommands(id: string): Promise<Command[]>;
  getCommand(id: string, cid: string): Promise<Command>;
  killCommand(id: string, cid: string): Promise<Command>;
  createVolume(name: string, quotaBytes?: number): Promise<Volume>;
  listVolumes(): Promise<Volume[]>;
  getVolume(name: string): Promise<Volume>;
  deleteVolume(name: string): Promise<void>;
  readVolumeFile(name: string, path: string): Promise<Buffer>;
  writeVolumeFile(name: string, path: string, data: string | Uint8Array): Promise<void>;
  images(): Promise<Image[]>;
  health(): Promise<Health>;
  /** Closes the client's idle connections. */
  close(): void;
}

// --- Sandbox ---------------------------------------------------------------------------

/** A duration: seconds, or a string like "30s", "500ms", "5m". */
export type Duration = number | string;
/** A memory size: MiB, or a string like "512MB", "2GB". */
export type Memory = number | string;

export interface SandboxOptions {
  /** "auto" (default) picks a tier by the code's imports; "nano" (WebAssembly, stdlib only) or "heavy" (gVisor, data science). */
  runtime?: Runtime;
  /** Python packages the code needs; they pick the heavy image that has them. */
  packages?: string[] | string;
  /** Each run's timeout; default the server's (30 s). */
  timeout?: Duration;
  /** The memory cap; default the server's (256 MiB). */
  memory?: Memory;
  env?: Record<string, string>;
  /** A heavy image by name; implies heavy. */
  image?: string;
  /** A way out through the daemon's egress gateway (heavy only). */
  network?: boolean;
  egressProfile?: string;
  /** Named volumes (client.createVolume) to mount by name at absolute paths: {data: "/mnt/data"} (":ro" for read-only); heavy only. */
  volumes?: Record<string, string>;
  url?: string;
  apiKey?: string;
  /** A Client to share (its connections) instead of url and apiKey. */
  client?: Client;
  /** false: every run is a fresh one-shot sandbox. Default true (a session). */
  stateful?: boolean;
}

export interface RunOptions {
  /** This run's timeout, over the Sandbox's. */
  timeout?: Duration;
  /** Environment variables for this run, over the Sandbox's. */
  env?: Record<string, string>;
  /** Files written before the code starts: {path: content} or InputFiles; relative paths land in /home/user. */
  files?: Record<string, string | Uint8Array> | InputFile[];
  /** Streams the run: called with each chunk of stdout as the code prints it. */
  onStdout?: (text: string) => void;
  /** Streams the run: called with each chunk of stderr as the code prints it. */
  onStderr?: (text: string) => void;
  /** Streams the run: called with each rich value the run displays, as it does. */
  onResult?: (output: Output) => void;
  /** Streams the run: called with each artifact (a figure) as the run makes it. */
  onArtifact?: (artifact: Artifact) => void;
}

/** The files of a Sandbox's session (heavy sessions only). */
export declare class Files {
  write(path: string, data: string | Uint8Array): Promise<void>;
  read(path: string): Promise<Buffer>;
  readText(path: string, encoding?: BufferEncoding): Promise<string>;
  /** Everything under `path` (default "."): relative paths under a relative path, absolute under an absolute one. */
  list(path?: string): Promise<FileInfo[]>;
  remove(path: string): Promise<void>;
}

export interface CommandOptions {
  /** Where it runs: absolute or relative to /home/user (the default). */
  cwd?: string;
  /** Laid over the session's environment. */
  env?: Record<string, string>;
  /** Text written to its stdin, which is then closed. */
  stdin?: string;
  /** Default the session's run timeout; at it the command is killed. */
  timeout?: Duration;
  /** Resolve at once with the running command; get, list and kill reach it. */
  background?: boolean;
  /** Streams its stdout as it writes it (foreground commands). */
  onStdout?: (text: string) => void;
  /** Streams its stderr as it writes it (foreground commands). */
  onStderr?: (text: string) => void;
}

/** Shell commands in a Sandbox's session (heavy sessions only). */
export declare class Commands {
  /** A string is a line for /bin/sh -c; an array a program and its arguments. */
  run(cmd: string | string[], opts?: CommandOptions): Promise<Command>;
  list(): Promise<Command[]>;
  get(id: string): Promise<Command>;
  kill(id: string): Promise<Command>;
}

/** A place to run untrusted Python: a session by default. */
export declare class Sandbox {
  constructor(opts?: SandboxOptions);
  /** Attaches to an open session by its id; a wrong or ended id throws NotFound here. */
  static connect(sessionId: string, opts?: SandboxOptions): Promise<Sandbox>;
  readonly client: Client;
  readonly stateful: boolean;
  readonly files: Files;
  readonly commands: Commands;
  get session(): Session | null;
  get sessionId(): string | null;
  get runtime(): string | null;
  get routing(): Routing | null;
  /** What happened to the session between runs, oldest first (a session_moved notice per move). */
  get notices(): Notice[];
  get closed(): boolean;
  run(code: string, opts?: RunOptions): Promise<Result>;
  /** The session's steps (each run is one), in the order they ran. */
  steps(): Promise<Step[]>;
  /** Makes the session's state that of `step`; the next run goes on from there. */
  rewind(step: string | Step): Promise<Session>;
  /** A new Sandbox (on this one's client) whose session starts from `step`. */
  fork(step: string | Step): Promise<Sandbox>;
  pause(): Promise<Session>;
  resume(): Promise<Session>;
  /** The variables and files of `step` (default the current one), read in a throwaway copy. */
  inspect(step?: string | Step | null, context?: string): Promise<StepInspection>;
  diff(step: string | Step, base?: string | Step | null, context?: string): Promise<StepDiff>;
  setIntent(name: string, ttl?: Duration): Promise<Intent>;
  clearIntent(): Promise<void>;
  /**
   * Ends the session; idempotent. With `keep`, the session's state and steps are kept (a durable
   * snapshot) and it is returned.
   */
  close(opts?: { keep?: boolean }): Promise<Session | null>;
  /** Lets go of the session without ending it; returns its id. */
  detach(): string | null;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Runs code once in a fresh sandbox. */
export declare function run(code: string, opts?: SandboxOptions & RunOptions): Promise<Result>;

export declare function parseDuration(v: Duration | undefined | null): number | undefined;
export declare function parseMemory(v: Memory | undefined | null): number | undefined;

// --- errors ----------------------------------------------------------------------------

/** An error the API answered with; one subclass per error code. */
export declare class AgentboxError extends Error {
  /** The stable error code ("timeout"); null when no daemon answered. */
  code: string | null;
  /** What to do about it ("" when there is nothing to add). */
  hint: string;
  /** The HTTP status, or null. */
  status: number | null;
  /** What the code produced before a limit ended the run, or null. */
  result: Result | null;
  /** The daemon's X-Request-Id, to find the request in its log. */
  requestId: string;
}
export declare class InvalidRequest extends AgentboxError {}
export declare class Unauthorized extends AgentboxError {}
export declare class PolicyViolation extends AgentboxError {}
export declare class Forbidden extends AgentboxError {}
export declare class NotFound extends AgentboxError {}
export declare class TimeoutError extends AgentboxError {}
export declare class Conflict extends AgentboxError {}
export declare class MemoryLimitExceeded extends AgentboxError {}
export declare class OutputLimitExceeded extends AgentboxError {}
export declare class InternalError extends AgentboxError {}
export declare class RuntimeUnavailable extends AgentboxError {}
export declare class DaemonUnreachable extends AgentboxError {}
export declare const ERROR_CLASSES: Readonly<Record<string, typeof AgentboxError>>;

/** The user's code raised or exited non-zero (Result.raiseForError). */
export declare class CodeError extends Error {
  result: Result;
  errorName: string;
  value: string;
  traceback: string;
  get stdout(): string;
  get stderr(): string;
}
