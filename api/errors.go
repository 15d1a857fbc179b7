package api

import "net/http"

// Error codes: the stable, machine-readable class of a failure. Switch on these; messages are
// for people and may change. Each code has one HTTP status, except that an oversized body is
// invalid_request with 413 and a wrong method is invalid_request with 405.
const (
	CodeInvalidRequest     = "invalid_request"     // 400: malformed or out-of-bounds input
	CodeUnauthorized       = "unauthorized"        // 401: missing or wrong API key
	CodePolicyViolation    = "policy_violation"    // 403: the code did something policy forbids
	CodeForbidden          = "forbidden"           // 403: the API key lacks the scope the request needs
	CodeNotFound           = "not_found"           // 404: no such session or route
	CodeTimeout            = "timeout"             // 408: the code ran past its timeout
	CodeConflict           = "conflict"            // 409: state does not allow it (e.g. session cap)
	CodeMemoryLimit        = "memory_limit"        // 422: the code went over its memory limit
	CodeOutputLimit        = "output_limit"        // 422: the code went over an output or file limit
	CodeInternal           = "internal"            // 500: a bug or fault in the daemon
	CodeNotImplemented     = "not_implemented"     // 501: an E2B call agentbox does not serve (only the E2B front door, never /v1)
	CodeRuntimeUnavailable = "runtime_unavailable" // 503: the runtime is missing, busy or stopping
)

// StatusOfCode is the HTTP status the daemon answers a code with (the table above): the one
// place a code becomes a status, shared by the daemon and by the Go client, which needs it for an
// error that arrives inside a stream whose own status was 200. An unknown code is 500.
func StatusOfCode(code string) int {
	switch code {
	case CodeInvalidRequest:
		return http.StatusBadRequest
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodePolicyViolation, CodeForbidden:
		return http.StatusForbidden
	case CodeNotFound:
		return http.StatusNotFound
	case CodeTimeout:
		return http.StatusRequestTimeout
	case CodeConflict:
		return http.StatusConflict
	case CodeMemoryLimit, CodeOutputLimit:
		return http.StatusUnprocessableEntity
	case CodeNotImplemented:
		return http.StatusNotImplemented
	case CodeRuntimeUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// ErrorResponse is the body of every failed request.
type ErrorResponse struct {
	Error ErrorDetail `json:"error"`
	// Result is present when a limit ended a run: what the code produced before it.
	Result *Result `json:"result,omitempty"`
}

// ErrorDetail says what went wrong and what to do about it.
type ErrorDetail struct {
	// Code is one of the Code constants.
	Code string `json:"code"`
	// Message says what was wrong: which field, which limit, which rule.
	Message string `json:"message"`
	// Hint, when not empty, says what to do about it.
	Hint string `json:"hint"`
}
