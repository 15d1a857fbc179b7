package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// statusClientGone is logged and counted when the client left before its answer (nginx's 499).
const statusClientGone = 499

// fail writes err as a typed error body. It is the only place handlers' errors turn into
// responses.
func (s *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	info := infoOf(r)
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		// Nobody is listening; record it and write nothing more than a status.
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "client went away", slog.String("request_id", info.id))
		w.WriteHeader(statusClientGone)
		return
	}
	status, body := s.errorBody(r, err)
	writeJSON(w, status, body)
}

// errorBody turns err into its status and body, hiding an internal error's details (they are
// logged under the request id), and notes its code for the request's log line.
func (s *API) errorBody(r *http.Request, err error) (int, api.ErrorResponse) {
	info := infoOf(r)
	status, body := apiwire.ErrorResponse(err)
	if body.Error.Code == string(sandbox.KindInternal) {
		s.log.LogAttrs(r.Context(), slog.LevelError, "internal error",
			slog.String("request_id", info.id), slog.String("route", info.route), slog.Any("err", err))
		body.Error.Message = fmt.Sprintf("internal error (request id %s)", info.id)
		body.Error.Hint = "this is a fault in the daemon, not in the request; its log has the details under this request id"
	}
	info.code = body.Error.Code
	return status, body
}

func invalid(format string, args ...any) *sandbox.Error {
	return sandbox.Errorf(sandbox.KindInvalidRequest, format, args...)
}
