package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// statusOf is the one place an error kind becomes an HTTP status.
func statusOf(k sandbox.Kind) int {
	switch k {
	case sandbox.KindInvalidRequest:
		return http.StatusBadRequest
	case sandbox.KindUnauthorized:
		return http.StatusUnauthorized
	case sandbox.KindPolicyViolation:
		return http.StatusForbidden
	case sandbox.KindNotFound:
		return http.StatusNotFound
	case sandbox.KindTimeout:
		return http.StatusRequestTimeout
	case sandbox.KindConflict:
		return http.StatusConflict
	case sandbox.KindMemoryLimit, sandbox.KindOutputLimit:
		return http.StatusUnprocessableEntity
	case sandbox.KindRuntimeUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// statusError overrides the status of its kind: 413 and 405 are invalid_request with a status
// of their own.
type statusError struct {
	status int
	err    *sandbox.Error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// ErrorResponse turns any error into a status and a wire error body. Internal errors keep their
// text; the server replaces it before it reaches a client (see Server.fail), while the local
// engine of `agentbox run` shows it to its own user.
func ErrorResponse(err error) (int, api.ErrorResponse) {
	e := sandbox.AsError(err)
	status := statusOf(e.Kind)
	var se *statusError
	if errors.As(err, &se) {
		status = se.status
	}
	return status, api.ErrorResponse{
		Error:  api.ErrorDetail{Code: string(e.Kind), Message: e.Error(), Hint: e.Hint},
		Result: ResultToAPI(e.Result),
	}
}

// statusClientGone is logged and counted when the client left before its answer (nginx's 499).
const statusClientGone = 499

// fail writes err as a typed error body. It is the only place handlers' errors turn into
// responses.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	info := infoOf(r)
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		// Nobody is listening; record it and write nothing more than a status.
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "client went away", slog.String("request_id", info.id))
		w.WriteHeader(statusClientGone)
		return
	}
	status, body := ErrorResponse(err)
	if body.Error.Code == string(sandbox.KindInternal) {
		s.log.LogAttrs(r.Context(), slog.LevelError, "internal error",
			slog.String("request_id", info.id), slog.String("route", info.route), slog.Any("err", err))
		body.Error.Message = fmt.Sprintf("internal error (request id %s)", info.id)
		body.Error.Hint = "this is a fault in the daemon, not in the request; its log has the details under this request id"
	}
	info.code = body.Error.Code
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agentbox"`)
	}
	writeJSON(w, status, body)
}

func invalid(format string, args ...any) *sandbox.Error {
	return sandbox.Errorf(sandbox.KindInvalidRequest, format, args...)
}
