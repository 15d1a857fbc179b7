package mcpserver_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/mcpserver"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// ctxTier is a tier whose sessions have code contexts and snapshot, rewind and fork by copying
// their variables: enough of the time-travel contract for the step tools, which are about the
// code around the tier. A run "k=v" sets k in the run's context; the core's inspection script
// is answered with the variables of its run's context, as the script would.
type ctxTier struct{}

type ctxSession struct {
	mu    sync.Mutex
	vars  map[string]map[string]string // context → name → repr
	snaps map[string]map[string]map[string]string
}

// Interface guards.
var (
	_ sandbox.Runtime     = ctxTier{}
	_ sandbox.Snapshotter = (*ctxSession)(nil)
)

func (ctxTier) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Tier: "heavy", Sessions: true, Contained: true, Snapshot: true, Rewind: true, Fork: true, Contexts: true}
}
func (ctxTier) Run(context.Context, *sandbox.RunRequest) (*sandbox.Result, error) {
	return &sandbox.Result{}, nil
}
func (ctxTier) NewSession(context.Context, sandbox.SessionOptions) (sandbox.Session, error) {
	return &ctxSession{vars: map[string]map[string]string{}, snaps: map[string]map[string]map[string]string{}}, nil
}
func (ctxTier) Close() error { return nil }

func cloneVars(v map[string]map[string]string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for c, m := range v {
		out[c] = maps.Clone(m)
	}
	return out
}

func (s *ctxSession) Run(_ context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.Contains(req.Code, "_agentbox_inspect") {
		type v struct {
			Name string `json:"name"`
			Type string `json:"type"`
			Repr string `json:"repr"`
		}
		out := struct {
			Variables []v   `json:"variables"`
			Files     []any `json:"files"`
		}{Variables: []v{}, Files: []any{}}
		for _, k := range slices.Sorted(maps.Keys(s.vars[req.Context])) {
			out.Variables = append(out.Variables, v{Name: k, Type: "str", Repr: s.vars[req.Context][k]})
		}
		b, _ := json.Marshal(out)
		return &sandbox.Result{Stdout: string(b)}, nil
	}
	k, val, _ := strings.Cut(req.Code, "=")
	if s.vars[req.Context] == nil {
		s.vars[req.Context] = map[string]string{}
	}
	s.vars[req.Context][k] = val
	return &sandbox.Result{}, nil
}
func (s *ctxSession) Close() error { return nil }
func (s *ctxSession) Snapshot(_ context.Context, step string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snaps[step] = cloneVars(s.vars)
	return nil
}
func (s *ctxSession) Persist(context.Context, string) (sandbox.SnapshotRef, error) {
	return sandbox.SnapshotRef{}, nil
}
func (s *ctxSession) Rewind(_ context.Context, step, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vars = cloneVars(s.snaps[step])
	return nil
}
func (s *ctxSession) Fork(_ context.Context, step, _ string, _ sandbox.SessionOptions) (sandbox.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &ctxSession{vars: cloneVars(s.snaps[step]), snaps: map[string]map[string]map[string]string{}}, nil
}
func (s *ctxSession) Forget(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.snaps, step)
}

// step_inspect and step_diff take an optional code context, described in their input schemas:
// the variables are that context's at the step (the main one's without it); a context the step
// does not have is the core's not_found with the contexts it has in the hint; a name that is
// none is invalid; step_diff compares with the parent by default and with base when given; the
// first step has no parent; another tenant's session is not found, context or not.
func TestStepToolsContext(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{ctxTier{}}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	keysFile := filepath.Join(t.TempDir(), auth.KeysFile)
	keys, err := auth.NewKeys(adminKey, keysFile)
	if err != nil {
		t.Fatal(err)
	}
	h, err := mcpserver.NewHandler(mcpserver.HTTPOptions{Engine: sandbox.WithAudit(m, nil), Keys: keys, Options: mcpserver.Options{Logger: log}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	f := &fixture{url: hs.URL, keysFile: keysFile}
	acme := connect(t, f.url, f.key(t, "acme", auth.ScopeSessions), "")
	beta := connect(t, f.url, f.key(t, "beta", auth.ScopeSessions), "")

	// The schemas: context is optional and described (by the contract's parameter).
	list, err := acme.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"step_inspect", "step_diff"} {
		b, _ := json.Marshal(find(list.Tools, name).InputSchema)
		var in struct {
			Required   []string
			Properties map[string]struct{ Type, Description string }
		}
		if err := json.Unmarshal(b, &in); err != nil {
			t.Fatal(err)
		}
		c := in.Properties["context"]
		if c.Type != "string" || !strings.Contains(c.Description, "code context") || slices.Contains(in.Required, "context") ||
			!slices.Equal(in.Required, []string{"session_id", "step"}) {
			t.Errorf("%s's input schema: %s", name, b)
		}
	}

	// Runs name a context through the E2B code interpreter's port (internal/e2b/interp), not
	// over /v1 or MCP: here, through the core as acme.
	ctx := context.Background()
	v := m.As(sandbox.Caller{Tenant: "acme"})
	s, err := v.CreateSession(ctx, sandbox.SessionOptions{Tier: "heavy"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range []sandbox.RunRequest{{Code: "m=1"}, {Code: "x=first", Context: "alpha"}, {Code: "x=second", Context: "alpha"}, {Code: "y=3", Context: "beta"}} {
		res, err := v.RunInSession(ctx, s.ID, &r)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Step)
	}
	// session_steps names the context each step ran in: what to give step_inspect.
	var l api.StepList
	decode(t, call(t, acme, "session_steps", map[string]any{"session_id": s.ID}), &l)
	if len(l.Steps) != 4 || l.Steps[0].Context != "" || l.Steps[1].Context != "alpha" || l.Steps[3].Context != "beta" {
		t.Errorf("session_steps: %+v", l.Steps)
	}
	vars := func(in api.StepInspection) map[string]string {
		out := map[string]string{}
		for _, v := range in.Variables {
			out[v.Name] = v.Repr
		}
		return out
	}
	var in api.StepInspection // decoded afresh each time: an absent context must read as ""
	decode(t, call(t, acme, "step_inspect", map[string]any{"session_id": s.ID, "step": ids[3], "context": "alpha"}), &in)
	if got := vars(in); in.Context != "alpha" || len(got) != 1 || got["x"] != "second" {
		t.Errorf("alpha at step 4: %+v", in)
	}
	in = api.StepInspection{}
	decode(t, call(t, acme, "step_inspect", map[string]any{"session_id": s.ID, "step": ids[1], "context": "alpha"}), &in)
	if got := vars(in); len(got) != 1 || got["x"] != "first" {
		t.Errorf("alpha at step 2: %+v", in)
	}
	in = api.StepInspection{}
	decode(t, call(t, acme, "step_inspect", map[string]any{"session_id": s.ID, "step": ids[3]}), &in)
	if got := vars(in); in.Context != "" || len(got) != 1 || got["m"] != "1" {
		t.Errorf("the main context at step 4: %+v", in)
	}
	e := toolError(t, call(t, acme, "step_inspect", map[string]any{"session_id": s.ID, "step": ids[1], "context": "beta"}))
	if e.Error.Code != api.CodeNotFound || !strings.Contains(e.Error.Message, `no code context "beta"`) || !strings.Contains(e.Error.Hint, "alpha") {
		t.Errorf("beta at step 2, before it was made: %+v", e)
	}
	e = toolError(t, call(t, acme, "step_inspect", map[string]any{"session_id": s.ID, "step": ids[3], "context": "no/such"}))
	if e.Error.Code != api.CodeInvalidRequest || !strings.Contains(e.Error.Message, "not a context name") {
		t.Errorf("a name that is none: %+v", e)
	}

	var d api.StepDiff
	decode(t, call(t, acme, "step_diff", map[string]any{"session_id": s.ID, "step": ids[2], "context": "alpha"}), &d)
	if d.Base != ids[1] || d.Step != ids[2] || len(d.Changed) != 1 || d.Changed[0].Name != "x" || d.Changed[0].Repr != "second" || len(d.Added)+len(d.Removed) != 0 {
		t.Errorf("alpha from step 2 to 3: %+v", d)
	}
	d = api.StepDiff{}
	decode(t, call(t, acme, "step_diff", map[string]any{"session_id": s.ID, "step": ids[2], "base": ids[0]}), &d)
	if d.Base != ids[0] || len(d.Added)+len(d.Changed)+len(d.Removed) != 0 {
		t.Errorf("the main context from step 1 to 3: %+v", d)
	}
	e = toolError(t, call(t, acme, "step_diff", map[string]any{"session_id": s.ID, "step": ids[0]}))
	if e.Error.Code != api.CodeInvalidRequest || !strings.Contains(e.Error.Message, "no parent") {
		t.Errorf("a diff of the first step: %+v", e)
	}
	e = toolError(t, call(t, acme, "step_diff", map[string]any{"session_id": s.ID, "step": ids[2], "base": ids[0], "context": "alpha"}))
	if e.Error.Code != api.CodeNotFound || !strings.Contains(e.Error.Message, `no code context "alpha"`) {
		t.Errorf("a diff in alpha from a step before it: %+v", e)
	}

	for _, tool := range []string{"step_inspect", "step_diff"} {
		if e := toolError(t, call(t, beta, tool, map[string]any{"session_id": s.ID, "step": ids[2], "context": "alpha"})); e.Error.Code != api.CodeNotFound {
			t.Errorf("beta's %s on acme's session: %+v", tool, e)
		}
	}
}
