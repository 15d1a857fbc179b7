package heavy

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The pool's figures reach Prometheus without a sandbox: a runtime that has not started its pool
// reports its sizing, its claims and its template's state.
func TestMetrics(t *testing.T) {
	rt := &Runtime{sizing: newPoolSizing(2, 1<<30, 16, defaultPoolShrinkAfter), target: 5, tplState: TemplateSuspended, slots: make(chan struct{}, 1)}
	rt.pc.hits.Add(3)
	rt.pc.missRestored.Add(2)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(rt)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "/" + l.GetValue()
			}
			got[key] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	for key, want := range map[string]float64{
		"agentbox_heavy_pool_target/target":              5,
		"agentbox_heavy_pool_target/min":                 2,
		"agentbox_heavy_pool_target/max":                 12,
		"agentbox_heavy_pool_claims_total/hit":           3,
		"agentbox_heavy_pool_memory_bytes/budget":        1 << 30,
		"agentbox_heavy_pool_memory_bytes/per_sandbox":   idleSandboxBytes,
		"agentbox_heavy_pool_memory_bytes/warm":          0,
		"agentbox_heavy_pool_claims_total/miss_restored": 2,
		"agentbox_heavy_template_state/suspended":        1,
		"agentbox_heavy_template_state/restoring":        0,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
}
