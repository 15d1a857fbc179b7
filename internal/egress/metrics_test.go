package egress

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// GET /metrics shows what the gateway decided: requests by decision and profile, the alerts
// repeated violations raised (and whether they ended the session), the intents in force.
func TestMetrics(t *testing.T) {
	f := newFixture(t, testPolicy, nil)
	f.get(t, "GET", "https://api.allowed.test/v1/x", "")
	for range 3 {
		f.get(t, "GET", "https://unknown.test/", "")
	}
	select {
	case <-f.ended:
	case <-time.After(2 * time.Second):
		t.Fatal("three violations did not end the session")
	}
	if _, err := f.g.SetIntent("s2", "test", "weather", time.Minute); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(f.g)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			got[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	for name, want := range map[string]float64{
		"agentbox_egress_requests_total{decision=allowed,profile=test}": 1,
		"agentbox_egress_requests_total{decision=denied,profile=test}":  3,
		"agentbox_egress_alerts_total{ended=true,source=egress}":        1,
		"agentbox_egress_intents_active{}":                              1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v (all: %v)", name, got[name], want, got)
		}
	}
	if got["agentbox_egress_profiles{}"] < 1 {
		t.Errorf("agentbox_egress_profiles: %v", got)
	}
	if _, ok := got["agentbox_egress_request_seconds_total{decision=allowed}"]; !ok {
		t.Errorf("no request time for allowed requests: %v", got)
	}
}
