package interp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/daemon/daemontest"
	"github.com/agentbox-dev/agentbox/internal/e2b/interp"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

func TestMain(m *testing.M) { daemontest.Main(m) }

func heavyManager(t testing.TB) *sandbox.Audited { return daemontest.HeavyManager(t) }

// interpServer serves the code interpreter of a new session of tenant acme on tier.
func interpServer(t testing.TB, tier sandbox.Tier) (*httptest.Server, *sandbox.View, string) {
	t.Helper()
	m := heavyManager(t)
	acme := m.As(sandbox.Caller{Tenant: "acme"})
	s, err := acme.CreateSession(context.Background(), sandbox.SessionOptions{Tier: tier})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { acme.CloseSession(s.ID) })
	h := interp.New(interp.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.Serve(w, r, interp.Target{Session: s.ID, Engine: acme})
	}))
	t.Cleanup(srv.Close)
	return srv, acme, s.ID
}

// measure runs op b.N times and reports its median and p99 (ms) besides ns/op.
func measure(b *testing.B, op func()) {
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		op()
		ds = append(ds, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[min(len(ds)-1, len(ds)*99/100)].Microseconds())/1000, "p99-ms")
}
