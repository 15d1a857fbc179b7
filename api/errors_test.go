package api_test

import (
	"testing"

	"github.com/agentbox-dev/agentbox/api"
)

// Each code has one HTTP status (the table in errors.go and api/openapi.yaml); the daemon and
// the Go client both read it from StatusOfCode.
func TestStatusOfCode(t *testing.T) {
	for _, tc := range []struct {
		code   string
		status int
	}{
		{api.CodeInvalidRequest, 400},
		{api.CodeUnauthorized, 401},
		{api.CodePolicyViolation, 403},
		{api.CodeForbidden, 403},
		{api.CodeNotFound, 404},
		{api.CodeTimeout, 408},
		{api.CodeConflict, 409},
		{api.CodeMemoryLimit, 422},
		{api.CodeOutputLimit, 422},
		{api.CodeInternal, 500},
		{api.CodeRuntimeUnavailable, 503},
		{api.CodeNotImplemented, 501},
		{"no_such_code", 500},
	} {
		if got := api.StatusOfCode(tc.code); got != tc.status {
			t.Errorf("StatusOfCode(%q) = %d, want %d", tc.code, got, tc.status)
		}
	}
}
