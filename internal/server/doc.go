// Package server is agentbox's HTTP API: it decodes and validates requests, checks the bearer
// token, hands work to a sandbox.Manager and turns the core's error kinds into status codes and
// typed error bodies. The contract is api/openapi.yaml; a test checks that every route served
// here is described there and the other way round.
//
// One request passes, in order: request id and panic recovery, logging and metrics, routing
// (unknown route 404, wrong method 405), authentication (every route but GET /v1/health), the
// body limit and a strict JSON decoder (unknown fields and wrong types are refused, naming the
// field), then the handler. Errors are translated exactly once, in errors.go.
package server
