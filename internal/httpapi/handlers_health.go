package httpapi

import (
	"context"
	"net/http"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// GET /v1/health. It needs no key, so it says only what a load balancer needs: the version and
// whether each runtime can take runs.
func (s *API) handleHealth(w http.ResponseWriter, r *http.Request) {
	h := api.Health{Status: api.HealthOK, Version: s.version, Runtimes: []api.RuntimeHealth{}}
	up := 0
	for _, t := range s.m.Tiers() {
		rt, _ := s.m.Runtime(t)
		rh := api.RuntimeHealth{Name: string(t), OK: true, State: "running"}
		if hr, ok := rt.(sandbox.Health); ok {
			ctx, cancel := context.WithTimeout(r.Context(), s.healthTO)
			rh.State, rh.OK = hr.Health(ctx)
			cancel()
		}
		if rh.OK {
			up++
		}
		h.Runtimes = append(h.Runtimes, rh)
	}
	status := http.StatusOK
	switch {
	case up == 0:
		h.Status, status = api.HealthUnavailable, http.StatusServiceUnavailable
	case up < len(h.Runtimes):
		h.Status = api.HealthDegraded
	}
	writeJSON(w, status, h)
}
