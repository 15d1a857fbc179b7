package apiwire_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// TestErrorResponse holds every kind to the code and status api/errors.go promises.
func TestErrorResponse(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		kind   sandbox.Kind
		code   string
		status int
	}{
		{sandbox.KindInvalidRequest, api.CodeInvalidRequest, 400},
		{sandbox.KindUnauthorized, api.CodeUnauthorized, 401},
		{sandbox.KindPolicyViolation, api.CodePolicyViolation, 403},
		{sandbox.KindNotFound, api.CodeNotFound, 404},
		{sandbox.KindTimeout, api.CodeTimeout, 408},
		{sandbox.KindConflict, api.CodeConflict, 409},
		{sandbox.KindMemoryLimit, api.CodeMemoryLimit, 422},
		{sandbox.KindOutputLimit, api.CodeOutputLimit, 422},
		{sandbox.KindInternal, api.CodeInternal, 500},
		{sandbox.KindNotImplemented, api.CodeNotImplemented, 501},
		{sandbox.KindRuntimeUnavailable, api.CodeRuntimeUnavailable, 503},
	} {
		t.Run(tt.code, func(t *testing.T) {
			err := fmt.Errorf("session %q: %w", "s1", sandbox.Errorf(tt.kind, "it failed").WithHint("do better"))
			status, body := apiwire.ErrorResponse(err)
			if status != tt.status || body.Error.Code != tt.code || body.Error.Hint != "do better" || body.Result != nil {
				t.Errorf("got %d %+v, want %d %s", status, body, tt.status, tt.code)
			}
		})
	}
	// An error with no kind is internal, and keeps its text for the caller to hide or show.
	status, body := apiwire.ErrorResponse(errors.New("worker 3 crashed"))
	if status != 500 || body.Error.Code != api.CodeInternal || body.Error.Message != "worker 3 crashed" {
		t.Errorf("plain error: %d %+v", status, body)
	}
}

func TestErrorResponseWithStatusAndPartialResult(t *testing.T) {
	t.Parallel()
	err := apiwire.WithStatus(http.StatusRequestEntityTooLarge, sandbox.Errorf(sandbox.KindInvalidRequest, "too big"))
	if status, body := apiwire.ErrorResponse(err); status != 413 || body.Error.Code != api.CodeInvalidRequest {
		t.Errorf("status override: %d %+v", status, body)
	}
	partial := &sandbox.Result{Stdout: "partial\n", Runtime: "nano"}
	status, body := apiwire.ErrorResponse(&sandbox.Error{Kind: sandbox.KindTimeout, Message: "past its timeout", Result: partial})
	if status != 408 || body.Result == nil || body.Result.Stdout != "partial\n" || body.Result.Runtime != "nano" {
		t.Errorf("partial result: %d %+v", status, body.Result)
	}
}
