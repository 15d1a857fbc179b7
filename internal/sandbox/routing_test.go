package sandbox_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// answering returns a fake of tier whose runs answer with result(req), or with an empty result
// that took 2 s when result is nil; it lists images.
func answering(tier sandbox.Tier, result func(req *sandbox.RunRequest) *sandbox.Result, images []sandbox.ImageInfo) *runtimetest.Fake {
	f := tierFake(tier)
	f.Catalog = images
	f.Answer = func(_ context.Context, req *sandbox.RunRequest, _ *runtimetest.FakeSession) (*sandbox.Result, error) {
		if result == nil {
			return &sandbox.Result{Runtime: tier, Timing: sandbox.Timing{Total: 2 * time.Second}}, nil
		}
		res := result(req)
		res.Runtime = tier
		return res, nil
	}
	return f
}

// Interface guards.
var _ sandbox.Router = routerFunc(nil)

func (r routerFunc) Route(req *sandbox.RunRequest) (sandbox.Decision, error) { return r(req) }

type routerFunc func(req *sandbox.RunRequest) (sandbox.Decision, error)

// missing answers like nano for code that imports a module it lacks.
func missing(mod string) func(*sandbox.RunRequest) *sandbox.Result {
	return func(*sandbox.RunRequest) *sandbox.Result {
		return &sandbox.Result{ExitCode: 1, Stdout: "partial\n", Timing: sandbox.Timing{Total: 2 * time.Second},
			Error: &sandbox.PyError{Name: "ModuleNotFoundError", Value: "No module named '" + mod + "'"}}
	}
}

func tiers(t *testing.T, nano, heavy *runtimetest.Fake, r sandbox.Router) *sandbox.Manager {
	t.Helper()
	rts := []sandbox.Runtime{nano}
	if heavy != nil {
		rts = append(rts, heavy)
	}
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: rts, Router: r})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

var toNano = routerFunc(func(req *sandbox.RunRequest) (sandbox.Decision, error) {
	if req.Tier == tierNano {
		return sandbox.Decision{Tier: tierNano, Reasons: []string{"nano: runtime requested"}}, nil
	}
	return sandbox.Decision{Tier: tierNano, Reasons: []string{"nano: 1 dynamic import(s) the router cannot read"}}, nil
})

var datascience = []sandbox.ImageInfo{{Name: "python-datascience", Modules: []string{"json", "numpy", "pandas"}}}

// A ModuleNotFoundError in nano for a module an image has: run again in heavy, once, with what
// the first try left of the timeout, and say so.
func TestManagerRetriesInHeavy(t *testing.T) {
	nano := answering(tierNano, missing("pandas.core"), nil)
	heavy := answering(tierHeavy, func(*sandbox.RunRequest) *sandbox.Result {
		return &sandbox.Result{Stdout: "ok\n"}
	}, datascience)
	m := tiers(t, nano, heavy, toNano)
	res, err := m.Run(context.Background(), &sandbox.RunRequest{Code: "m = __import__(name)", Limits: sandbox.Limits{Timeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Runtime != tierHeavy || res.Stdout != "ok\n" || res.Error != nil {
		t.Errorf("result %+v, want heavy's", res)
	}
	want := []string{"nano: 1 dynamic import(s) the router cannot read", "heavy: retried after ModuleNotFoundError: No module named 'pandas.core' in nano"}
	if res.Routing == nil || res.Routing.Tier != tierHeavy || !slices.Equal(res.Routing.Reasons, want) {
		t.Errorf("routing %+v, want heavy %q", res.Routing, want)
	}
	if runs := heavy.Runs(); len(runs) != 1 || runs[0].Tier != tierHeavy || runs[0].Limits.Timeout != 8*time.Second {
		t.Errorf("heavy ran %+v, want one run with the 8 s left", runs)
	}
}

func TestManagerDoesNotRetry(t *testing.T) {
	other := func(*sandbox.RunRequest) *sandbox.Result {
		return &sandbox.Result{ExitCode: 1, Error: &sandbox.PyError{Name: "ImportError", Value: "cannot import name 'x' from 'json'"}}
	}
	tests := []struct {
		name   string
		nano   func(*sandbox.RunRequest) *sandbox.Result
		heavy  bool
		tier   sandbox.Tier
		reason string
	}{
		{"module no image has", missing("torch"), true, sandbox.TierAuto, "nano: 1 dynamic import(s) the router cannot read"},
		{"runtime nano requested", missing("pandas"), true, tierNano, "nano: runtime requested"},
		{"no heavy tier", missing("pandas"), false, sandbox.TierAuto, "nano: 1 dynamic import(s) the router cannot read"},
		{"another exception", other, true, sandbox.TierAuto, "nano: 1 dynamic import(s) the router cannot read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nano := answering(tierNano, tc.nano, nil)
			var heavy *runtimetest.Fake
			if tc.heavy {
				heavy = answering(tierHeavy, nil, datascience)
			}
			m := tiers(t, nano, heavy, toNano)
			res, err := m.Run(context.Background(), &sandbox.RunRequest{Code: "x", Tier: tc.tier})
			if err != nil {
				t.Fatal(err)
			}
			if res.Runtime != tierNano || res.Error == nil || !slices.Equal(res.Routing.Reasons, []string{tc.reason}) {
				t.Errorf("got %+v routing %+v, want nano's own result", res, res.Routing)
			}
			if heavy != nil && len(heavy.Runs()) != 0 {
				t.Errorf("heavy ran")
			}
		})
	}
}

// A syntax error found while routing answers the run as the code's exception; no runtime runs.
func TestManagerAnswersSyntaxErrors(t *testing.T) {
	pe := &sandbox.PyError{Name: "SyntaxError", Value: "'(' was never closed (line 1, column 6)", Traceback: "  File \"<string>\", line 1\n    print(1\n         ^\nSyntaxError: '(' was never closed\n"}
	r := routerFunc(func(*sandbox.RunRequest) (sandbox.Decision, error) {
		return sandbox.Decision{Tier: tierNano, Reasons: []string{"nano: SyntaxError at line 1, column 6 (not run)"}, SyntaxError: pe}, nil
	})
	nano := answering(tierNano, nil, nil)
	m := tiers(t, nano, nil, r)
	res, err := m.Run(context.Background(), &sandbox.RunRequest{Code: "print(1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 1 || res.Error == nil || *res.Error != *pe || res.Stderr != pe.Traceback || res.Runtime != tierNano {
		t.Errorf("result %+v", res)
	}
	if res.Routing == nil || !slices.Equal(res.Routing.Reasons, []string{"nano: SyntaxError at line 1, column 6 (not run)"}) {
		t.Errorf("routing %+v", res.Routing)
	}
	if len(nano.Runs()) != 0 {
		t.Error("a sandbox ran code that cannot compile")
	}
}

// Who decides what: packages and explicit heavy never reach the router; explicit nano does, and
// its refusal is the request's error.
func TestManagerRouterScope(t *testing.T) {
	var asked []sandbox.Tier
	r := routerFunc(func(req *sandbox.RunRequest) (sandbox.Decision, error) {
		asked = append(asked, req.Tier)
		if req.Tier == tierNano {
			return sandbox.Decision{}, sandbox.Errorf(sandbox.KindInvalidRequest, "runtime nano cannot import pandas (line 1)")
		}
		return sandbox.Decision{Tier: tierNano, Reasons: []string{"nano: no imports"}}, nil
	})
	nano := answering(tierNano, nil, nil)
	heavy := answering(tierHeavy, nil, datascience)
	m := tiers(t, nano, heavy, r)
	ctx := context.Background()
	if res, err := m.Run(ctx, &sandbox.RunRequest{Code: "x", Tier: tierHeavy}); err != nil || res.Runtime != tierHeavy {
		t.Errorf("explicit heavy: %+v %v", res, err)
	}
	if res, err := m.Run(ctx, &sandbox.RunRequest{Code: "x", Packages: []string{"pandas"}}); err != nil || res.Runtime != tierHeavy {
		t.Errorf("packages: %+v %v", res, err)
	}
	if _, err := m.Run(ctx, &sandbox.RunRequest{Code: "import pandas", Tier: tierNano}); sandbox.KindOf(err) != sandbox.KindInvalidRequest {
		t.Errorf("explicit nano with pandas: %v, want invalid_request", err)
	}
	if res, err := m.Run(ctx, &sandbox.RunRequest{Code: "x"}); err != nil || res.Runtime != tierNano {
		t.Errorf("auto: %+v %v", res, err)
	}
	if !slices.Equal(asked, []sandbox.Tier{tierNano, sandbox.TierAuto}) {
		t.Errorf("router asked for %v, want [nano auto]", asked)
	}
}
