package e2bwire

import (
	"context"

	"github.com/agentbox-dev/agentbox/internal/auth"
)

// The E2B ports the SDKs address inside a sandbox: envd (commands, files) and the code
// interpreter (execute, contexts).
const (
	EnvdPort   = 49983
	InterpPort = 49999
)

// EnvdVersion is the envd version agentbox reports (the control plane's envdVersion). The SDKs
// choose wire details by it (for instance, uploads as application/octet-stream from 0.5.7, a
// default user from 0.4.0), so it says which of envd's behaviours internal/e2b/envd implements.
const EnvdVersion = "0.5.7"

// Target is the sandbox a request to an in-sandbox service was resolved to by internal/e2b,
// which has already checked the caller's access token and that the session exists for the caller
// (another tenant's is not found). Services read it with TargetOf and act through the engine as
// Identity.Caller sees it (Manager.As / Audited.As), never as the daemon.
type Target struct {
	// SandboxID is the E2B id the SDK used; SessionID the agentbox session behind it.
	SandboxID string
	SessionID string
	// Port is the in-sandbox port the SDK addressed (EnvdPort, InterpPort).
	Port int
	// Identity is who asks: the API key the sandbox's access token was issued to (at create or
	// connect), with its tenant and scopes as they are now (a revoked key is refused).
	Identity auth.Identity
}

type targetKey struct{}

// WithTarget returns ctx carrying t.
func WithTarget(ctx context.Context, t Target) context.Context {
	return context.WithValue(ctx, targetKey{}, t)
}

// TargetOf returns the Target internal/e2b resolved the request of ctx to.
func TargetOf(ctx context.Context) (Target, bool) {
	t, ok := ctx.Value(targetKey{}).(Target)
	return t, ok
}
