package sandbox_test

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// ctxTier is a tier whose sessions have code contexts: "k=v" sets a variable in the run's
// context; the inspection script answers with that context's variables. Its snapshots are
// copies in memory.
type ctxTier struct{}

type ctxVars map[string]map[string]string

func (v ctxVars) clone() ctxVars {
	out := ctxVars{}
	for c, m := range v {
		out[c] = maps.Clone(m)
	}
	return out
}

type ctxSession struct {
	mu    sync.Mutex
	vars  ctxVars
	snaps map[string]ctxVars
}

func (ctxTier) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Tier: "ctx", Sessions: true, Snapshot: true, Rewind: true, Fork: true, Contexts: true}
}
func (ctxTier) Run(context.Context, *sandbox.RunRequest) (*sandbox.Result, error) {
	return &sandbox.Result{}, nil
}
func (ctxTier) NewSession(context.Context, sandbox.SessionOptions) (sandbox.Session, error) {
	return &ctxSession{vars: ctxVars{}, snaps: map[string]ctxVars{}}, nil
}
func (ctxTier) Close() error { return nil }

func (s *ctxSession) Run(_ context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.Contains(req.Code, "_agentbox_inspect") {
		out := map[string]any{"variables": []map[string]string{}, "files": []any{}}
		var vs []map[string]string
		for k, v := range s.vars[req.Context] {
			vs = append(vs, map[string]string{"name": k, "type": "str", "repr": v})
		}
		if vs != nil {
			out["variables"] = vs
		}
		b, _ := json.Marshal(out)
		return &sandbox.Result{Stdout: string(b)}, nil
	}
	k, v, _ := strings.Cut(req.Code, "=")
	if s.vars[req.Context] == nil {
		s.vars[req.Context] = map[string]string{}
	}
	s.vars[req.Context][k] = v
	return &sandbox.Result{}, nil
}
func (s *ctxSession) Close() error { return nil }
func (s *ctxSession) Snapshot(_ context.Context, step string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snaps[step] = s.vars.clone()
	return nil
}
func (s *ctxSession) Persist(context.Context, string) (sandbox.SnapshotRef, error) {
	return sandbox.SnapshotRef{}, nil
}
func (s *ctxSession) Rewind(_ context.Context, step, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vars = s.snaps[step].clone()
	return nil
}
func (s *ctxSession) Fork(_ context.Context, step, _ string, _ sandbox.SessionOptions) (sandbox.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &ctxSession{vars: s.snaps[step].clone(), snaps: map[string]ctxVars{}}, nil
}
func (s *ctxSession) Forget(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.snaps, step)
}

// Inspecting a step names one of the session's code contexts: its variables at that step are
// shown, not the main context's nor a later step's; a context no run up to the step made is not
// found, with the contexts that exist in the hint; a bad name is invalid; a tier without
// contexts says so; another tenant's session is not found; a diff compares one context.
func TestInspectStepContext(t *testing.T) {
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{ctxTier{}, &counterTier{durable: map[string]int{}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	v := m.As(sandbox.Caller{Tenant: "acme"})
	info, err := v.CreateSession(ctx, sandbox.SessionOptions{Tier: "ctx"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range []sandbox.RunRequest{{Code: "m=1"}, {Code: "x=first", Context: "a"}, {Code: "x=second", Context: "a"}, {Code: "y=3", Context: "b"}} {
		res, err := v.RunInSession(ctx, info.ID, &r)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Step)
	}
	vars := func(in sandbox.Inspection, err error) map[string]string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, x := range in.Variables {
			out[x.Name] = x.Repr
		}
		return out
	}
	if got := vars(v.InspectStepIn(ctx, info.ID, ids[1], "a")); len(got) != 1 || got["x"] != "first" {
		t.Errorf("context a at step 2: %v", got)
	}
	if got := vars(v.InspectStepIn(ctx, info.ID, ids[3], "a")); len(got) != 1 || got["x"] != "second" {
		t.Errorf("context a at step 4: %v", got)
	}
	if got := vars(v.InspectStep(ctx, info.ID, ids[3])); len(got) != 1 || got["m"] != "1" {
		t.Errorf("the main context at step 4: %v", got)
	}
	in, err := v.InspectStepIn(ctx, info.ID, ids[3], "b")
	if err != nil || in.Context != "b" {
		t.Errorf("context b at step 4: %+v %v", in, err)
	}
	_, err = v.InspectStepIn(ctx, info.ID, ids[2], "b")
	if e := sandbox.AsError(err); e == nil || e.Kind != sandbox.KindNotFound || !strings.Contains(e.Hint, "a (and the main one)") {
		t.Errorf("context b at step 3, before a run made it: %v", err)
	}
	if _, err := v.InspectStepIn(ctx, info.ID, ids[3], "no/such"); sandbox.KindOf(err) != sandbox.KindInvalidRequest {
		t.Errorf("a context name with a slash: %v", err)
	}
	d, err := v.DiffStepsIn(ctx, info.ID, ids[1], ids[2], "a")
	if err != nil || len(d.Changed) != 1 || d.Changed[0].Repr != "second" || len(d.Added)+len(d.Removed) != 0 {
		t.Errorf("diff of context a from step 2 to 3: %+v %v", d, err)
	}
	// No base: the step's parent, for every front door; the first step has none to compare with.
	if d, err := v.DiffStepsIn(ctx, info.ID, "", ids[2], "a"); err != nil || d.From != ids[1] || len(d.Changed) != 1 {
		t.Errorf("diff of step 3 with no base: %+v %v", d, err)
	}
	if _, err := v.DiffStepsIn(ctx, info.ID, "", ids[0], ""); sandbox.KindOf(err) != sandbox.KindInvalidRequest {
		t.Errorf("diff of the first step with no base: %v", err)
	}
	other := m.As(sandbox.Caller{Tenant: "other"})
	if _, err := other.InspectStepIn(ctx, info.ID, ids[1], "a"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("another tenant's step: %v", err)
	}

	plain, err := v.CreateSession(ctx, sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	step := addRun(t, v, plain.ID, 1).Step
	waitDurable(t, v, plain.ID)
	if _, err := v.InspectStepIn(ctx, plain.ID, step, "a"); sandbox.KindOf(err) != sandbox.KindNotImplemented {
		t.Errorf("a context of a tier without them: %v", err)
	}
}
