package apiwire

import (
	"errors"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// StatusOf is the one place an error kind becomes an HTTP status. The status is part of the
// API's contract (api/openapi.yaml): the HTTP API answers with it, and the local engine of
// `agentbox run` reports it as the client would.
func StatusOf(k sandbox.Kind) int {
	// A kind's name is its wire code (ErrorResponse below), so the table is api's.
	return api.StatusOfCode(string(k))
}

// WithStatus gives err a status other than its kind's: 413 and 405 are invalid_request with a
// status of their own.
func WithStatus(status int, err *sandbox.Error) error {
	return &statusError{status: status, err: err}
}

type statusError struct {
	status int
	err    *sandbox.Error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// ErrorResponse turns any error into a status and a wire error body, with the partial result
// the error carries. Internal errors keep their text: the HTTP API replaces it before it reaches
// a client, while the local engine of `agentbox run` shows it to its own user.
func ErrorResponse(err error) (int, api.ErrorResponse) {
	e := sandbox.AsError(err)
	status := StatusOf(e.Kind)
	var se *statusError
	if errors.As(err, &se) {
		status = se.status
	}
	return status, api.ErrorResponse{
		Error:  api.ErrorDetail{Code: string(e.Kind), Message: e.Error(), Hint: e.Hint},
		Result: ResultToAPI(e.Result),
	}
}

func invalid(format string, args ...any) *sandbox.Error {
	return sandbox.Errorf(sandbox.KindInvalidRequest, format, args...)
}
