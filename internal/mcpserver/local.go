package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Core is what Local needs of the engine: the core's operations, as one caller sees them.
// *sandbox.View is one (the daemon serves each call through the View of the key's caller), so
// another tenant's sessions, files, intents, artifacts and records are not found here as over
// HTTP.
type Core interface {
	Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.Result, error)
	CreateSession(ctx context.Context, opts sandbox.SessionOptions) (sandbox.SessionInfo, error)
	RunInSession(ctx context.Context, id string, req *sandbox.RunRequest) (*sandbox.Result, error)
	Sessions() []sandbox.SessionInfo
	CloseSession(id string) error
	WriteFile(ctx context.Context, id, path string, content []byte) error
	ReadFile(ctx context.Context, id, path string) ([]byte, error)
	ListFiles(ctx context.Context, id, path string) ([]sandbox.FileInfo, error)
	Artifact(id string) (sandbox.Artifact, io.ReadSeekCloser, error)
	Images() []sandbox.ImageInfo
	SetIntent(id, name string, ttl time.Duration) (sandbox.IntentInfo, error)
	ClearIntent(id string) error
	QueryAudit(ctx context.Context, f sandbox.AuditFilter) ([]json.RawMessage, error)
	Steps(id string) ([]sandbox.Step, string, error)
	Session(id string) (sandbox.SessionInfo, error)
	Rewind(ctx context.Context, id, step string) (sandbox.Step, error)
	Fork(ctx context.Context, id, step string) (sandbox.SessionInfo, error)
	Pause(ctx context.Context, id string) (sandbox.SessionInfo, error)
	Resume(ctx context.Context, id string) (sandbox.SessionInfo, error)
	InspectStepIn(ctx context.Context, id, step, codeContext string) (sandbox.Inspection, error)
	DiffStepsIn(ctx context.Context, id, from, to, codeContext string) (sandbox.StepDiff, error)
}

// Interface guards.
var (
	_ Core    = (*sandbox.View)(nil)
	_ Backend = local{}
)

// Local is the Backend over the core, in process: requests are read with package apiwire, as the
// HTTP API reads them, and answers turned into the API's types. Its errors are the core's.
func Local(c Core) Backend { return local{c} }

type local struct{ c Core }

func (l local) Run(ctx context.Context, in api.RunRequest) (*api.Result, error) {
	req, err := apiwire.RunRequestFromAPI(in)
	if err != nil {
		return nil, err
	}
	res, err := l.c.Run(ctx, &req)
	return runAnswer(res, err)
}

func (l local) CreateSession(ctx context.Context, in api.CreateSessionRequest) (*api.Session, error) {
	opts, err := apiwire.SessionOptionsFromAPI(in)
	if err != nil {
		return nil, err
	}
	info, err := l.c.CreateSession(ctx, opts)
	if err != nil {
		return nil, err
	}
	s := apiwire.SessionToAPI(info)
	return &s, nil
}

func (l local) RunInSession(ctx context.Context, id string, in api.RunRequest) (*api.Result, error) {
	req, err := apiwire.SessionRunRequestFromAPI(in)
	if err != nil {
		return nil, err
	}
	res, err := l.c.RunInSession(ctx, id, &req)
	return runAnswer(res, sessionError(id, err))
}

func (l local) ListSessions(context.Context) ([]api.Session, error) {
	return apiwire.SessionsToAPI(l.c.Sessions()).Sessions, nil
}

func (l local) CloseSession(_ context.Context, id string) error {
	return sessionError(id, l.c.CloseSession(id))
}

func (l local) WriteFile(ctx context.Context, id, path string, content []byte) error {
	return sessionError(id, l.c.WriteFile(ctx, id, path, content))
}

func (l local) ReadFile(ctx context.Context, id, path string) ([]byte, error) {
	b, err := l.c.ReadFile(ctx, id, path)
	return b, sessionError(id, err)
}

func (l local) ListFiles(ctx context.Context, id, dir string) ([]api.FileInfo, error) {
	list, err := l.c.ListFiles(ctx, id, dir)
	if err != nil {
		return nil, sessionError(id, err)
	}
	return apiwire.FilesToAPI(list).Files, nil
}

func (l local) Artifact(_ context.Context, id string) ([]byte, string, error) {
	a, rc, err := l.c.Artifact(id)
	if err != nil {
		return nil, "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, "", fmt.Errorf("artifact %s: %w", id, err)
	}
	return b, a.MIME, nil
}

func (l local) Images(context.Context) ([]api.Image, error) {
	return apiwire.ImagesToAPI(l.c.Images()).Images, nil
}

func (l local) SetIntent(_ context.Context, id, name string, ttl float64) (*api.Intent, error) {
	if name == "" {
		return nil, sandbox.Errorf(sandbox.KindInvalidRequest, "the intent has no name").
			WithHint("give the name of an intent the session's egress profile defines")
	}
	d, err := apiwire.DurationFromAPI(ttl)
	if err != nil {
		return nil, err
	}
	info, err := l.c.SetIntent(id, name, d)
	if err != nil {
		return nil, sessionError(id, err)
	}
	in := apiwire.IntentToAPI(info)
	return &in, nil
}

func (l local) ClearIntent(_ context.Context, id string) error {
	return sessionError(id, l.c.ClearIntent(id))
}

func (l local) Audit(ctx context.Context, q AuditFilter) ([]api.AuditRecord, error) {
	raw, err := l.c.QueryAudit(ctx, sandbox.AuditFilter{Session: q.Session, Tenant: q.Tenant, Agent: q.Agent,
		Kind: q.Kind, Decision: q.Decision, Since: q.Since, Until: q.Until, Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]api.AuditRecord, 0, len(raw))
	for _, r := range raw {
		var rec api.AuditRecord
		if err := json.Unmarshal(r, &rec); err != nil {
			return nil, fmt.Errorf("audit record: %w", err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// runAnswer turns a run's outcome into the API's: the result, or the error carrying the partial
// result (also when a runtime returned it beside the error rather than inside it).
func runAnswer(res *sandbox.Result, err error) (*api.Result, error) {
	if err == nil {
		return apiwire.ResultToAPI(res), nil
	}
	if e := sandbox.AsError(err); e.Result == nil && res != nil {
		cp := *e
		cp.Result = res
		return nil, &cp
	}
	return nil, err
}

// sessionError gives "no such session" (the core's sentinel, wrapped with the session's id) a
// message and a hint in the tools' terms. Other errors pass, a not_found that says more (a file
// that is not there) too.
func sessionError(id string, err error) error {
	var e *sandbox.Error
	if err == nil || !errors.As(err, &e) || e.Kind != sandbox.KindNotFound || e.Message != "" {
		return err
	}
	return sandbox.Errorf(sandbox.KindNotFound, "no open session %q", id).
		WithHint("it was closed, expired after its idle timeout, or never created; session_list lists the open ones")
}

func (l local) Steps(_ context.Context, id string) (*api.StepList, error) {
	steps, head, err := l.c.Steps(id)
	if err != nil {
		return nil, stepError(id, err)
	}
	out := apiwire.StepsToAPI(steps, head)
	return &out, nil
}

func (l local) Rewind(ctx context.Context, id, step string) (*api.Session, error) {
	if _, err := l.c.Rewind(ctx, id, step); err != nil {
		return nil, stepError(id, err)
	}
	info, err := l.c.Session(id)
	if err != nil {
		return nil, sessionError(id, err)
	}
	s := apiwire.SessionToAPI(info)
	return &s, nil
}

func (l local) Fork(ctx context.Context, id, step string) (*api.Session, error) {
	return sessionAnswer(l.c.Fork(ctx, id, step))(id)
}

func (l local) Pause(ctx context.Context, id string) (*api.Session, error) {
	return sessionAnswer(l.c.Pause(ctx, id))(id)
}

func (l local) Resume(ctx context.Context, id string) (*api.Session, error) {
	return sessionAnswer(l.c.Resume(ctx, id))(id)
}

func (l local) InspectStepIn(ctx context.Context, id, step, codeContext string) (*api.StepInspection, error) {
	in, err := l.c.InspectStepIn(ctx, id, step, codeContext)
	if err != nil {
		return nil, stepError(id, err)
	}
	out := apiwire.InspectionToAPI(in)
	return &out, nil
}

// DiffStepsIn compares step with base ("" its parent, the core's default), as GET .../diff does.
func (l local) DiffStepsIn(ctx context.Context, id, step, base, codeContext string) (*api.StepDiff, error) {
	d, err := l.c.DiffStepsIn(ctx, id, base, step, codeContext)
	if err != nil {
		return nil, stepError(id, err)
	}
	out := apiwire.DiffToAPI(d)
	return &out, nil
}

func sessionAnswer(info sandbox.SessionInfo, err error) func(id string) (*api.Session, error) {
	return func(id string) (*api.Session, error) {
		if err != nil {
			return nil, stepError(id, err)
		}
		s := apiwire.SessionToAPI(info)
		return &s, nil
	}
}

// stepError is sessionError for the time-travel tools: an error with a message of its own (a
// step not found, a dropped snapshot) keeps it.
func stepError(id string, err error) error {
	var e *sandbox.Error
	if errors.As(err, &e) && e.Message != "" {
		return err
	}
	return sessionError(id, err)
}
