package httpapi

import (
	"net/http"

	"github.com/agentbox-dev/agentbox/api"
)

// POST /v1/egress/reload
func (s *API) handleReloadEgress(w http.ResponseWriter, r *http.Request) {
	names, err := s.engine(r).ReloadEgressPolicy()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.ReloadResult{Profiles: names})
}
