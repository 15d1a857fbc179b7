package e2bwire

import (
	"encoding/json"
	"net/http"

	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// NotImplemented is the typed error for an E2B call agentbox answers without serving it: kind
// not_implemented (HTTP 501), and a message that names the call (for instance
// "POST /sandboxes/{sandboxID}/snapshots (Sandbox.createSnapshot)"), so that a program learns
// at once which call it was instead of meeting silence or a generic 404.
func NotImplemented(call string) *sandbox.Error {
	return sandbox.Errorf(sandbox.KindNotImplemented, "the E2B call %s is not implemented by agentbox", call).
		WithHint("docs/E2B.md lists the E2B calls agentbox serves and what to use instead")
}

// Body is the E2B API's error body: the HTTP status as a number and a message (the SDKs read
// code, and show message).
type Body struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// WriteError answers err in the E2B API's format, with the status of its kind (apiwire, the one
// place kinds become statuses); the message carries the hint, which E2B's body has no field for.
// The caller logs an internal error first: its text is not sent.
func WriteError(w http.ResponseWriter, err error) {
	status, body := Error(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// Error is err as WriteError answers it.
func Error(err error) (int, Body) {
	e := sandbox.AsError(err)
	msg := e.Error()
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	if e.Kind == sandbox.KindInternal {
		// As the HTTP API does: a fault's text is for the daemon's log, not for the caller.
		msg = "internal error: the daemon's log has the details"
	}
	status := apiwire.StatusOf(e.Kind)
	return status, Body{Code: status, Message: msg}
}
