package httpapi

import (
	"net/http"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/apiwire"
)

// An intent opens the egress rules its profile names for it, for as long as it lasts: an agent
// about to look up the weather sets "weather-lookup", and only then may its session reach the
// weather API.

// GET /v1/sessions/{id}/intent
func (s *API) handleGetIntent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	in, err := s.engine(r).Intent(id)
	if err != nil {
		s.fail(w, r, sessionError(id, err))
		return
	}
	writeJSON(w, http.StatusOK, apiwire.IntentToAPI(in))
}

// PUT /v1/sessions/{id}/intent
func (s *API) handleSetIntent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var in api.SetIntentRequest
	if err := decode(w, r, s.maxBody, &in, false); err != nil {
		s.fail(w, r, err)
		return
	}
	if in.Name == "" {
		s.fail(w, r, invalid("the intent has no name").WithHint("send {\"name\": \"INTENT\", \"ttl\": SECONDS}; GET /v1/sessions/{id} shows the session's egress profile"))
		return
	}
	ttl, err := apiwire.DurationFromAPI(in.TTL)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	info, err := s.engine(r).SetIntent(id, in.Name, ttl)
	if err != nil {
		s.fail(w, r, sessionError(id, err))
		return
	}
	writeJSON(w, http.StatusOK, apiwire.IntentToAPI(info))
}

// DELETE /v1/sessions/{id}/intent
func (s *API) handleClearIntent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.engine(r).ClearIntent(id); err != nil {
		s.fail(w, r, sessionError(id, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
