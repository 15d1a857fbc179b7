package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Engine is what the HTTP API needs of the core: one method per thing a route does, and the
// tiers for health and metrics. *sandbox.Manager is one; the daemon, which builds both, says so
// at compile time. The API owns this interface so that it depends on what it calls, not on the
// Manager's whole surface, and a test can serve the API over anything that answers these.
type Engine interface {
	// Runs and routing (POST /v1/run, POST /v1/route).
	Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.Result, error)
	Route(req *sandbox.RunRequest) (sandbox.Decision, error)

	// Sessions (/v1/sessions...).
	CreateSession(ctx context.Context, opts sandbox.SessionOptions) (sandbox.SessionInfo, error)
	RunInSession(ctx context.Context, id string, req *sandbox.RunRequest) (*sandbox.Result, error)
	Session(id string) (sandbox.SessionInfo, error)
	Sessions() []sandbox.SessionInfo
	CloseSession(id string) error
	CloseSessionKeep(ctx context.Context, id string) (sandbox.SessionInfo, error)

	// Commands in a session (/v1/sessions/{id}/commands...).
	RunCommand(ctx context.Context, id string, c sandbox.Command, out sandbox.OutputSink) (sandbox.CommandInfo, error)
	Commands(id string) ([]sandbox.CommandInfo, error)
	CommandStatus(id, cid string) (sandbox.CommandInfo, error)
	KillCommand(id, cid string) (sandbox.CommandInfo, error)

	// Time travel (/v1/sessions/{id}/steps..., rewind, fork, pause, resume).
	Steps(id string) ([]sandbox.Step, string, error)
	Step(id, step string) (sandbox.Step, error)
	Rewind(ctx context.Context, id, step string) (sandbox.Step, error)
	Fork(ctx context.Context, id, step string) (sandbox.SessionInfo, error)
	Pause(ctx context.Context, id string) (sandbox.SessionInfo, error)
	Resume(ctx context.Context, id string) (sandbox.SessionInfo, error)
	InspectStep(ctx context.Context, id, step string) (sandbox.Inspection, error)
	DiffSteps(ctx context.Context, id, from, to string) (sandbox.StepDiff, error)
	InspectStepIn(ctx context.Context, id, step, codeContext string) (sandbox.Inspection, error)
	DiffStepsIn(ctx context.Context, id, from, to, codeContext string) (sandbox.StepDiff, error)
	ReadStepFile(ctx context.Context, id, step, path string) ([]byte, error)

	// A session's files, artifacts and the images (/v1/sessions/{id}/files..., /v1/artifacts,
	// /v1/images).
	WriteFile(ctx context.Context, id, path string, content []byte) error
	ReadFile(ctx context.Context, id, path string) ([]byte, error)
	ListFiles(ctx context.Context, id, path string) ([]sandbox.FileInfo, error)
	RemoveFile(ctx context.Context, id, path string) error
	Artifact(id string) (sandbox.Artifact, io.ReadSeekCloser, error)
	Images() []sandbox.ImageInfo

	// Egress: intents and the policy (/v1/sessions/{id}/intent, /v1/egress/reload).
	SetIntent(id, name string, ttl time.Duration) (sandbox.IntentInfo, error)
	ClearIntent(id string) error
	Intent(id string) (sandbox.IntentInfo, error)
	ReloadEgressPolicy() ([]string, error)

	// The audit log (GET /v1/audit).
	QueryAudit(ctx context.Context, f sandbox.AuditFilter) ([]json.RawMessage, error)

	// The tiers (GET /v1/health, metrics). A runtime that is a sandbox.Health reports its own
	// state; one that is a prometheus.Collector adds its metrics to GET /metrics.
	Tiers() []sandbox.Tier
	Runtime(t sandbox.Tier) (sandbox.Runtime, bool)
}

// engine is the Engine as the request's caller sees it: an engine that can answer as one caller
// (sandbox.Manager and sandbox.Audited, through sandbox.View) does, so that the ownership rules
// are the core's, the same for every front door.
func (s *API) engine(r *http.Request) Engine {
	type callers interface {
		As(sandbox.Caller) *sandbox.View
	}
	c, ok := s.m.(callers)
	if !ok {
		return s.m
	}
	id, ok := auth.IdentityOf(r.Context())
	if !ok {
		return s.m
	}
	return c.As(id.Caller)
}
