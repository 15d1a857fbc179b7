package server

import (
	"net/http"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// An intent opens the egress rules its profile names for it, for as long as it lasts: an agent
// about to look up the weather sets "weather-lookup", and only then may its session reach the
// weather API.

// GET /v1/sessions/{id}/intent
func (s *Server) handleGetIntent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	in, err := s.m.Intent(id)
	if err != nil {
		s.fail(w, r, sessionError(id, err))
		return
	}
	writeJSON(w, http.StatusOK, intentToAPI(in))
}

// PUT /v1/sessions/{id}/intent
func (s *Server) handleSetIntent(w http.ResponseWriter, r *http.Request) {
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
	if err := checkTimeout(in.TTL); err != nil {
		s.fail(w, r, err)
		return
	}
	info, err := s.m.SetIntent(id, in.Name, seconds(in.TTL))
	if err != nil {
		s.fail(w, r, sessionError(id, err))
		return
	}
	writeJSON(w, http.StatusOK, intentToAPI(info))
}

// DELETE /v1/sessions/{id}/intent
func (s *Server) handleClearIntent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.m.ClearIntent(id); err != nil {
		s.fail(w, r, sessionError(id, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func intentToAPI(in sandbox.IntentInfo) api.Intent {
	out := api.Intent{Name: in.Name}
	if in.Name != "" {
		t := in.Expires
		out.ExpiresAt = &t
	}
	return out
}
