package sandbox

import (
	"errors"
	"fmt"
)

// Kind is the stable, machine-readable class of a failure. Clients switch on it; messages are for
// people and may change.
type Kind string

// The error kinds of the API contract (DESIGN.md, "Error contract").
const (
	KindInvalidRequest  Kind = "invalid_request"
	KindUnauthorized    Kind = "unauthorized"
	KindNotFound        Kind = "not_found"
	KindTimeout         Kind = "timeout"
	KindMemoryLimit     Kind = "memory_limit"
	KindOutputLimit     Kind = "output_limit"
	KindPolicyViolation Kind = "policy_violation"
	// KindForbidden: the API key is valid but lacks the scope the request needs.
	KindForbidden          Kind = "forbidden"
	KindRuntimeUnavailable Kind = "runtime_unavailable"
	KindConflict           Kind = "conflict"
	// KindNotImplemented: a call of a protocol agentbox speaks (E2B's) that it does not serve;
	// the message names the call.
	KindNotImplemented Kind = "not_implemented"
	KindInternal       Kind = "internal"
)

// Error is a failure with a kind, a message that says what was wrong (which limit, which field) and,
// where it helps, a hint that says what to do about it.
type Error struct {
	Kind    Kind
	Message string
	Hint    string
	// Result is the part of a run that completed before the failure (output so far, timings), so a
	// timeout or a memory limit never loses what the code printed. Nil when nothing ran.
	Result *Result
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Kind)
	}
	return e.Message
}

// Is makes errors.Is(err, sandbox.ErrTimeout) true for any *Error of that kind.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Kind == e.Kind && t.Message == ""
}

// Sentinels for errors.Is and for wrapping with context: fmt.Errorf("session %q: %w", id, ErrNotFound).
var (
	ErrInvalidRequest     = &Error{Kind: KindInvalidRequest}
	ErrUnauthorized       = &Error{Kind: KindUnauthorized}
	ErrNotFound           = &Error{Kind: KindNotFound}
	ErrTimeout            = &Error{Kind: KindTimeout}
	ErrMemoryLimit        = &Error{Kind: KindMemoryLimit}
	ErrOutputLimit        = &Error{Kind: KindOutputLimit}
	ErrPolicyViolation    = &Error{Kind: KindPolicyViolation}
	ErrForbidden          = &Error{Kind: KindForbidden}
	ErrRuntimeUnavailable = &Error{Kind: KindRuntimeUnavailable}
	ErrConflict           = &Error{Kind: KindConflict}
	ErrNotImplemented     = &Error{Kind: KindNotImplemented}
	ErrInternal           = &Error{Kind: KindInternal}
)

// Errorf returns an *Error of the given kind with a formatted message.
func Errorf(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// WithHint returns e with a hint that tells the caller what to do.
func (e *Error) WithHint(format string, args ...any) *Error {
	e.Hint = fmt.Sprintf(format, args...)
	return e
}

// KindOf reports the kind of err: the kind of the first *Error in its chain, KindInternal for any
// other non-nil error, and "" for nil.
func KindOf(err error) Kind {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}

// AsError returns the first *Error in err's chain, or an internal *Error wrapping err's text.
// It returns nil for nil.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		if e.Message == "" {
			// A bare sentinel wrapped with context: keep the context as the message.
			return &Error{Kind: e.Kind, Message: err.Error(), Hint: e.Hint, Result: e.Result}
		}
		return e
	}
	return &Error{Kind: KindInternal, Message: err.Error()}
}
