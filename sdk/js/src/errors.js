// Errors: one class per error code of the API (api/errors.go), chosen by the stable
// `error.code` of the daemon's answer, never by its message. An exception raised by the user's
// code is not an API error: the run answers normally and `result.error` carries it
// (`result.raiseForError()` throws it as a CodeError).

/** An error the agentbox API answered with (or, for DaemonUnreachable, a transport error). */
export class AgentboxError extends Error {
  /**
   * @param {string|null} code the stable error code ("timeout"), null when no daemon answered
   * @param {string} message what was wrong, for people
   * @param {{hint?: string, status?: number|null, result?: object|null, requestId?: string, cause?: unknown}} [opts]
   */
  constructor(code, message, opts = {}) {
    super(message, opts.cause !== undefined ? { cause: opts.cause } : undefined);
    this.name = new.target.name;
    this.code = code;
    this.hint = opts.hint || '';
    this.status = opts.status ?? null;
    this.result = opts.result ?? null;
    this.requestId = opts.requestId || '';
  }

  /** "code: message (hint)", as the Python SDK prints it. */
  toString() {
    let s = this.code ? `${this.name} ${this.code}: ${this.message}` : `${this.name}: ${this.message}`;
    if (this.hint) s += ` (${this.hint})`;
    return s;
  }
}

/** invalid_request: a malformed request, or one asking for more than the server allows (400, 413, 405). */
export class InvalidRequest extends AgentboxError {}
/** unauthorized: the API key is missing or wrong (401). */
export class Unauthorized extends AgentboxError {}
/** policy_violation: the code did something the daemon's policy forbids (403). */
export class PolicyViolation extends AgentboxError {}
/** forbidden: the key is valid but lacks the scope the request needs (403). */
export class Forbidden extends AgentboxError {}
/** not_found: no such session, file, artifact or route (404). */
export class NotFound extends AgentboxError {}
/** timeout: the code ran past its timeout and was stopped; `.result` has the output so far (408). */
export class TimeoutError extends AgentboxError {}
/** conflict: the daemon's state does not allow it, e.g. its session cap is reached (409). */
export class Conflict extends AgentboxError {}
/** memory_limit: the code went over its memory limit and was killed (422). */
export class MemoryLimitExceeded extends AgentboxError {}
/** output_limit: the code went over an output or file limit (422). */
export class OutputLimitExceeded extends AgentboxError {}
/** internal: a fault in the daemon; its log has the details under requestId (500). */
export class InternalError extends AgentboxError {}
/** runtime_unavailable: the tier is not on this daemon, not ready, or the daemon is stopping (503). */
export class RuntimeUnavailable extends AgentboxError {}
/** No daemon answered at the URL (refused, reset, timed out); code and status are null. */
export class DaemonUnreachable extends AgentboxError {}

/** The error class of each API error code. */
export const ERROR_CLASSES = Object.freeze({
  invalid_request: InvalidRequest,
  unauthorized: Unauthorized,
  policy_violation: PolicyViolation,
  forbidden: Forbidden,
  not_found: NotFound,
  timeout: TimeoutError,
  conflict: Conflict,
  memory_limit: MemoryLimitExceeded,
  output_limit: OutputLimitExceeded,
  internal: InternalError,
  runtime_unavailable: RuntimeUnavailable,
});

/** The HTTP status of each API error code (a streamed run's error event carries no status). */
export const STATUS_OF_CODE = Object.freeze({
  invalid_request: 400, unauthorized: 401, policy_violation: 403, forbidden: 403, not_found: 404, timeout: 408,
  conflict: 409, memory_limit: 422, output_limit: 422, internal: 500, runtime_unavailable: 503,
});

/** A code for answers that do not carry the API's error body (a proxy's page, say). */
function codeForStatus(status) {
  if (status === 400 || status === 405 || status === 413) return 'invalid_request';
  return {
    401: 'unauthorized', 403: 'policy_violation', 404: 'not_found', 408: 'timeout', 504: 'timeout',
    409: 'conflict', 502: 'runtime_unavailable', 503: 'runtime_unavailable',
  }[status] || 'internal';
}

/**
 * The error of a failed HTTP answer.
 * @param {number} status
 * @param {Buffer} body
 * @param {string} requestId
 * @param {(wire: object) => object} [makeResult] turns a wire Result into the SDK's Result
 */
export function fromResponse(status, body, requestId, makeResult) {
  let doc;
  try {
    doc = JSON.parse(body.toString('utf8'));
  } catch {
    doc = null;
  }
  const e = doc && typeof doc === 'object' ? doc.error : null;
  if (!e || typeof e.code !== 'string' || !e.code) {
    let excerpt = body.toString('utf8').trim();
    if (excerpt.length > 200) excerpt = excerpt.slice(0, 200) + '…';
    const code = codeForStatus(status);
    return new ERROR_CLASSES[code](code, `HTTP ${status}` + (excerpt ? `: ${excerpt}` : ''), {
      status, requestId,
      hint: 'the answer did not come from an agentbox daemon, or from an incompatible one; check the URL',
    });
  }
  const cls = ERROR_CLASSES[e.code] || AgentboxError;
  const result = doc.result && makeResult ? makeResult(doc.result) : (doc.result ?? null);
  return new cls(e.code, e.message || '', { hint: e.hint || '', status, result, requestId });
}

/** The user's code raised (or exited non-zero); thrown by Result.raiseForError(). */
export class CodeError extends Error {
  constructor(result, prefix = 'the code') {
    const err = result.error;
    let head = err
      ? `${prefix} raised ${err.name}` + (err.value ? `: ${err.value}` : '')
      : `${prefix} exited with status ${result.exit_code}`;
    if (err && err.traceback) head += `\n\nRemote traceback:\n${err.traceback.trimEnd()}`;
    super(head);
    this.name = 'CodeError';
    this.result = result;
    this.errorName = err ? err.name : '';
    this.value = err ? err.value : '';
    this.traceback = err ? err.traceback : '';
  }

  get stdout() { return this.result.stdout; }
  get stderr() { return this.result.stderr; }
}
