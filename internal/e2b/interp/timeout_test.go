package interp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/e2b/interp"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

type tenants map[string]sandbox.TenantPolicy

func (t tenants) Tenant(name string) sandbox.TenantPolicy { return t[name] }

// A cell may run as long as the server allows (E2B's kernel has no limit of its own: the client
// ends a cell by leaving), not a run's short default; a tenant whose maximum is lower runs with
// its session's timeout instead of being refused.
func TestCellTimeout(t *testing.T) {
	t.Parallel()
	var got []time.Duration
	fake := runtimetest.NewFake(sandbox.Capabilities{Tier: "heavy", Sessions: true})
	fake.Answer = func(_ context.Context, req *sandbox.RunRequest, _ *runtimetest.FakeSession) (*sandbox.Result, error) {
		got = append(got, req.Limits.Timeout)
		return &sandbox.Result{Stdout: "ok\n"}, nil
	}
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{fake},
		Tenants: tenants{"small": {Max: sandbox.Limits{Timeout: time.Minute}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	for _, tt := range []struct {
		tenant string
		want   time.Duration
	}{
		{"big", m.Policy().Max.Timeout},
		{"small", m.Policy().Defaults.Timeout},
	} {
		v := m.As(sandbox.Caller{Tenant: tt.tenant})
		s, err := v.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "heavy"})
		if err != nil {
			t.Fatal(err)
		}
		h := interp.New(interp.Options{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.Serve(w, r, interp.Target{Session: s.ID, Engine: v})
		}))
		got = nil
		e := run(t, srv.URL, map[string]any{"code": "print('ok')"})
		srv.Close()
		if e.err != nil || len(got) == 0 || got[len(got)-1] != tt.want {
			t.Errorf("tenant %s: the cell ran with %v (error %+v), want %v", tt.tenant, got, e.err, tt.want)
		}
	}
}
