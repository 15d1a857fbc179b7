package client

import (
	"fmt"

	"github.com/agentbox-dev/agentbox/api"
)

// Error is an error the API answered with.
type Error struct {
	// Status is the HTTP status, e.g. 408.
	Status int
	// Code is the stable error code, one of the api.Code constants (e.g. api.CodeTimeout).
	Code string
	// Message says what was wrong; Hint, when not empty, what to do about it.
	Message string
	Hint    string
	// Result is what the code produced before a limit ended the run, or nil.
	Result *api.Result
	// RequestID is the daemon's id of the request (X-Request-Id), for its log.
	RequestID string
}

// Error reads "agentbox: timeout: the code ran past its timeout of 2 s (raise ...)".
func (e *Error) Error() string {
	s := fmt.Sprintf("agentbox: %s: %s", e.Code, e.Message)
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}
