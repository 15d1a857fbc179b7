package sandbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/artifacts"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// policies is a TenantPolicies from a map.
type policies map[string]sandbox.TenantPolicy

func (p policies) Tenant(name string) sandbox.TenantPolicy { return p[name] }

// tenantManager runs a nano-like and a heavy-like fake under the policies; the heavy fake's runs
// wait for release when it is not nil.
func tenantManager(t *testing.T, p policies, release chan struct{}) *sandbox.Manager {
	t.Helper()
	nano, heavy := tierFake(tierNano), tierFake(tierHeavy)
	heavy.Catalog = datascience
	wait := func(ctx context.Context, req *sandbox.RunRequest, _ *runtimetest.FakeSession) (*sandbox.Result, error) {
		if release != nil && strings.HasPrefix(req.Code, "wait") {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return &sandbox.Result{Stdout: "ok\n"}, nil
	}
	nano.Answer, heavy.Answer = wait, wait
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{nano, heavy}, Tenants: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func as(tenant string) context.Context {
	return sandbox.WithCaller(context.Background(), sandbox.Caller{Tenant: tenant, Agent: tenant + "-bot"})
}

// wantQuota checks err is a conflict that names the quota and its value.
func wantQuota(t *testing.T, what string, err error, quota string) {
	t.Helper()
	e := sandbox.AsError(err)
	if e == nil || e.Kind != sandbox.KindConflict || !strings.Contains(e.Message, quota) {
		t.Errorf("%s: %v, want a conflict naming %q", what, err, quota)
	}
}

func TestTenantQuotas(t *testing.T) {
	release := make(chan struct{})
	m := tenantManager(t, policies{"acme": {MaxSessions: 2, MaxRuns: 1}}, release)

	// Sessions: two, then the quota.
	for range 2 {
		if _, err := m.CreateSession(as("acme"), sandbox.SessionOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := m.CreateSession(as("acme"), sandbox.SessionOptions{})
	wantQuota(t, "a third session", err, "max_sessions 2")
	// Another tenant is not counted against acme's, nor bound by it.
	for range 3 {
		if _, err := m.CreateSession(as("beta"), sandbox.SessionOptions{}); err != nil {
			t.Errorf("beta's session: %v", err)
		}
	}

	// Runs: one in progress, then the quota; beta runs meanwhile.
	done := make(chan error, 1)
	go func() {
		_, err := m.Run(as("acme"), &sandbox.RunRequest{Code: "wait()"})
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := m.Run(as("acme"), &sandbox.RunRequest{Code: "print(1)"})
		if err != nil {
			wantQuota(t, "a second run", err, "max_runs 1")
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiting run never took acme's run slot")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := m.Run(as("beta"), &sandbox.RunRequest{Code: "print(1)"}); err != nil {
		t.Errorf("beta's run while acme is at its quota: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := m.Run(as("acme"), &sandbox.RunRequest{Code: "print(1)"}); err != nil {
		t.Errorf("acme's run after its slot came back: %v", err)
	}
}

func TestTenantMemoryQuota(t *testing.T) {
	m := tenantManager(t, policies{"acme": {MaxMemoryBytes: 600 << 20}}, nil)
	if _, err := m.CreateSession(as("acme"), sandbox.SessionOptions{Limits: sandbox.Limits{MemoryBytes: 512 << 20}}); err != nil {
		t.Fatal(err)
	}
	_, err := m.CreateSession(as("acme"), sandbox.SessionOptions{Limits: sandbox.Limits{MemoryBytes: 128 << 20}})
	wantQuota(t, "a session past the memory quota", err, "max_memory_mb 600 MiB")
	_, err = m.Run(as("acme"), &sandbox.RunRequest{Code: "print(1)", Limits: sandbox.Limits{MemoryBytes: 128 << 20}})
	wantQuota(t, "a run past the memory quota", err, "max_memory_mb 600 MiB")
}

func TestTenantPolicy(t *testing.T) {
	m := tenantManager(t, policies{"acme": {
		Tiers: []sandbox.Tier{tierNano}, Max: sandbox.Limits{Timeout: 5 * time.Second},
		EgressProfiles: []string{"strict"}, DefaultEgressProfile: "strict",
	}, "beta": {Images: []string{"python-datascience"}}}, nil)
	for _, tc := range []struct {
		name, tenant string
		req          sandbox.RunRequest
		want         string // in the error; "" for none
	}{
		{"a tier it may use", "acme", sandbox.RunRequest{Code: "print(1)"}, ""},
		{"a tier it may not use", "acme", sandbox.RunRequest{Code: "print(1)", Tier: tierHeavy}, "may not use the heavy runtime"},
		{"packages, which only heavy has", "acme", sandbox.RunRequest{Code: "print(1)", Packages: []string{"pandas"}}, "may not use the heavy runtime"},
		{"above its timeout", "acme", sandbox.RunRequest{Code: "print(1)", Limits: sandbox.Limits{Timeout: 10 * time.Second}}, "above tenant acme's maximum of 5 s"},
		{"an image it may not use", "beta", sandbox.RunRequest{Code: "print(1)", Image: "python-gpu"}, "may not use the image python-gpu"},
		{"an image it may use", "beta", sandbox.RunRequest{Code: "print(1)", Image: "python-datascience"}, ""},
		{"another tenant is not bound", "gamma", sandbox.RunRequest{Code: "print(1)", Tier: tierHeavy}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Run(as(tc.tenant), &tc.req)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (sandbox.KindOf(err) != sandbox.KindInvalidRequest || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%v, want invalid_request with %q", err, tc.want)
			}
		})
	}
	// Egress profiles: acme's network session gets its default; another profile is refused.
	m2 := tenantManager(t, policies{"acme": {EgressProfiles: []string{"strict"}, DefaultEgressProfile: "strict"}}, nil)
	info, err := m2.CreateSession(as("acme"), sandbox.SessionOptions{Network: true})
	if err != nil || info.EgressProfile != "strict" {
		t.Errorf("acme's network session: %+v %v, want profile strict", info, err)
	}
	if _, err := m2.CreateSession(as("acme"), sandbox.SessionOptions{Network: true, EgressProfile: "default"}); err == nil ||
		!strings.Contains(err.Error(), "may not use the egress profile default") {
		t.Errorf("another profile: %v", err)
	}
}

// The CPU quota counts what a tenant's code ran in the last hour; past it, the next run is
// refused naming the quota, and another tenant runs on.
func TestTenantCPUQuota(t *testing.T) {
	nano := tierFake(tierNano)
	nano.Answer = func(context.Context, *sandbox.RunRequest, *runtimetest.FakeSession) (*sandbox.Result, error) {
		return &sandbox.Result{Stdout: "ok\n", Timing: sandbox.Timing{Execute: 400 * time.Millisecond}}, nil
	}
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{nano},
		Tenants: policies{"acme": {CPUPerHour: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i := range 3 { // 0.4 s each: 1.2 s after the third
		if _, err := m.Run(as("acme"), &sandbox.RunRequest{Code: "work()"}); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
	}
	_, err = m.Run(as("acme"), &sandbox.RunRequest{Code: "work()"})
	wantQuota(t, "a run past the CPU quota", err, "cpu_seconds_per_hour 1")
	if _, err := m.Run(as("beta"), &sandbox.RunRequest{Code: "work()"}); err != nil {
		t.Errorf("beta: %v", err)
	}
}

// The stored-bytes quota: an artifact that would pass it is not kept (the run's stderr says so);
// at the quota, runs are refused naming it.
func TestTenantStoredQuota(t *testing.T) {
	nano := tierFake(tierNano)
	nano.Answer = func(_ context.Context, req *sandbox.RunRequest, _ *runtimetest.FakeSession) (*sandbox.Result, error) {
		size := 512 << 10
		if req.Code == "big()" {
			size = 700 << 10
		}
		return &sandbox.Result{Stdout: "drew\n", Artifacts: []sandbox.Artifact{{Name: "figure.png", MIME: "image/png", Content: make([]byte, size)}}}, nil
	}
	store, err := artifacts.Open(t.TempDir(), artifacts.Options{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{nano}, Artifacts: store,
		Tenants: policies{"acme": {MaxStoredBytes: 1 << 20}, "beta": {MaxStoredBytes: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i := range 2 { // 512 KiB each: exactly the quota
		if res, err := m.Run(as("acme"), &sandbox.RunRequest{Code: "draw()"}); err != nil || len(res.Artifacts) != 1 {
			t.Fatalf("run %d: %+v %v", i+1, res, err)
		}
	}
	_, err = m.Run(as("acme"), &sandbox.RunRequest{Code: "draw()"})
	wantQuota(t, "a run at the stored quota", err, "max_stored_mb 1 MiB")

	if res, err := m.Run(as("beta"), &sandbox.RunRequest{Code: "big()"}); err != nil || len(res.Artifacts) != 1 {
		t.Fatalf("beta's first: %+v %v", res, err)
	}
	res, err := m.Run(as("beta"), &sandbox.RunRequest{Code: "big()"})
	if err != nil || len(res.Artifacts) != 0 || !strings.Contains(res.Stderr, "was not kept: tenant beta stores") {
		t.Errorf("beta's artifact past the quota: %+v %v, want it dropped with a note", res, err)
	}
}

// TenantOf names the tenant of a session and of a one-shot run while it runs (the egress gateway
// counts a tenant's bytes by it); once the run ends it is forgotten.
func TestTenantOf(t *testing.T) {
	nano := tierFake(tierNano)
	var m *sandbox.Manager
	var during string
	var found bool
	nano.Answer = func(_ context.Context, req *sandbox.RunRequest, s *runtimetest.FakeSession) (*sandbox.Result, error) {
		if s == nil {
			during, found = m.TenantOf(req.ID)
		}
		return &sandbox.Result{Stdout: "ok\n"}, nil
	}
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{nano}, Tenants: policies{}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Run(as("acme"), &sandbox.RunRequest{Code: "print(1)"}); err != nil {
		t.Fatal(err)
	}
	if !found || during != "acme" {
		t.Errorf("during the run: %q %v, want acme", during, found)
	}
	if id := nano.Runs()[0].ID; id == "" {
		t.Fatal("the run had no id")
	} else if _, ok := m.TenantOf(id); ok {
		t.Error("a finished run is still known")
	}
	info, err := m.CreateSession(as("beta"), sandbox.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tenant, ok := m.TenantOf(info.ID); !ok || tenant != "beta" {
		t.Errorf("the session: %q %v, want beta", tenant, ok)
	}
}

// An auto session does not move to a tier its tenant may not use: the run meets a module only heavy
// has, and the result stays nano's.
func TestTenantSessionDoesNotMoveOffItsTiers(t *testing.T) {
	nano, heavy := tierFake(tierNano), tierFake(tierHeavy)
	heavy.Catalog = datascience
	nano.Answer = func(context.Context, *sandbox.RunRequest, *runtimetest.FakeSession) (*sandbox.Result, error) {
		return &sandbox.Result{ExitCode: 1, Error: &sandbox.PyError{Name: "ModuleNotFoundError", Value: "No module named 'pandas'"}}, nil
	}
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{nano, heavy},
		Tenants: policies{"acme": {Tiers: []sandbox.Tier{tierNano}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, tc := range []struct {
		tenant string
		want   sandbox.Tier
	}{{"acme", tierNano}, {"beta", tierHeavy}} {
		info, err := m.CreateSession(as(tc.tenant), sandbox.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := m.RunInSession(as(tc.tenant), info.ID, &sandbox.RunRequest{Code: "m = __import__(name)"})
		if err != nil {
			t.Fatalf("%s: %v", tc.tenant, err)
		}
		if res.Runtime != tc.want {
			t.Errorf("%s's session ran in %s, want %s (routing %v)", tc.tenant, res.Runtime, tc.want, res.Routing)
		}
	}
}
