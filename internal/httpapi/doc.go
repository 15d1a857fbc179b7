// Package httpapi is agentbox's HTTP API, one of the daemon's front doors: it decodes and
// validates requests, hands work to an Engine (the daemon's sandbox.Manager) and answers with
// the API's wire types and typed error bodies. The contract is api/openapi.yaml; a test checks
// that every route served here is described there and the other way round.
//
// It is an http.Handler and nothing more: the daemon mounts it at /v1/ and /metrics beside the
// other front doors and owns the listener and its shutdown (internal/daemon/http.go). What the
// front doors share lives apart, so none imports another: the conversion between the wire and
// the core, and the error bodies, in internal/apiwire; the API key check in internal/auth.
//
// One request passes, in order: request id and panic recovery, logging and metrics, routing
// (unknown route 404, wrong method 405), authentication (every route but GET /v1/health), the
// body limit and a strict JSON decoder (unknown fields and wrong types are refused, naming the
// field), then the handler. Errors are translated exactly once, in errors.go.
package httpapi
