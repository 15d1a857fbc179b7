package mcpserver

import (
	"context"
	"time"

	"github.com/agentbox-dev/agentbox/api"
)

// Backend is what the tools call: agentbox's API in its wire types (package api), one method per
// operation. Local answers it over the core, in process; `agentbox mcp` answers it with the Go
// client of a running daemon. The methods and their errors mean what the HTTP API's operations
// do.
//
// An error a Backend returns is either a core error (*sandbox.Error, whose kind and hint apiwire
// turns into the API's code), or an *APIError that already is the API's error body, as a daemon
// answered it. Anything else is an internal error.
type Backend interface {
	Run(ctx context.Context, req api.RunRequest) (*api.Result, error)
	CreateSession(ctx context.Context, req api.CreateSessionRequest) (*api.Session, error)
	RunInSession(ctx context.Context, id string, req api.RunRequest) (*api.Result, error)
	ListSessions(ctx context.Context) ([]api.Session, error)
	CloseSession(ctx context.Context, id string) error
	WriteFile(ctx context.Context, id, path string, content []byte) error
	ReadFile(ctx context.Context, id, path string) ([]byte, error)
	ListFiles(ctx context.Context, id, dir string) ([]api.FileInfo, error)
	// Artifact returns an artifact's content and media type.
	Artifact(ctx context.Context, id string) ([]byte, string, error)
	Images(ctx context.Context) ([]api.Image, error)
	// SetIntent sets a session's egress intent for ttl seconds (0: the intent's maximum).
	SetIntent(ctx context.Context, id, name string, ttl float64) (*api.Intent, error)
	ClearIntent(ctx context.Context, id string) error
	Audit(ctx context.Context, q AuditFilter) ([]api.AuditRecord, error)
	// Time travel: a session's steps, rewind, fork, pause, resume, and what a step held.
	Steps(ctx context.Context, id string) (*api.StepList, error)
	Rewind(ctx context.Context, id, step string) (*api.Session, error)
	Fork(ctx context.Context, id, step string) (*api.Session, error)
	Pause(ctx context.Context, id string) (*api.Session, error)
	Resume(ctx context.Context, id string) (*api.Session, error)
	// InspectStepIn and DiffStepsIn read one code context's variables ("" the main one); base ""
	// is the step's parent.
	InspectStepIn(ctx context.Context, id, step, codeContext string) (*api.StepInspection, error)
	DiffStepsIn(ctx context.Context, id, step, base, codeContext string) (*api.StepDiff, error)
}

// AuditFilter selects audit records, as GET /v1/audit's query parameters do. Zero fields match
// everything; Limit is at least 1 and at most 1000 once the tool has checked it.
type AuditFilter struct {
	Session, Kind, Decision, Tenant, Agent string
	Since, Until                           time.Time
	Limit                                  int
}

// APIError is a failure already in the API's wire form: the error body (code, message, hint, and
// the partial result when a limit ended a run) that a daemon answered with.
type APIError struct {
	Body api.ErrorResponse
}

func (e *APIError) Error() string {
	s := e.Body.Error.Code + ": " + e.Body.Error.Message
	if e.Body.Error.Hint != "" {
		s += " (" + e.Body.Error.Hint + ")"
	}
	return s
}
