package httpapi

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// POST /v1/sessions
func (s *API) handleCreateSession(w http.ResponseWriter, r *http.Request) {
	var in api.CreateSessionRequest
	if err := decode(w, r, s.maxBody, &in, true); err != nil {
		s.fail(w, r, err)
		return
	}
	opts, err := apiwire.SessionOptionsFromAPI(in)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	info, err := s.engine(r).CreateSession(r.Context(), opts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	infoOf(r).runtime = string(info.Tier)
	writeJSON(w, http.StatusCreated, apiwire.SessionToAPI(info))
}

// GET /v1/sessions
func (s *API) handleListSessions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, apiwire.SessionsToAPI(s.engine(r).Sessions()))
}

// GET /v1/sessions/{id}
func (s *API) handleGetSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	info, err := s.engine(r).Session(id)
	if err != nil {
		s.fail(w, r, sessionError(id, err))
		return
	}
	writeJSON(w, http.StatusOK, apiwire.SessionToAPI(info))
}

// DELETE /v1/sessions/{id}[?keep=true]
func (s *API) handleCloseSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if v := r.URL.Query().Get("keep"); v != "" {
		keep, err := strconv.ParseBool(v)
		if err != nil {
			s.fail(w, r, sandbox.Errorf(sandbox.KindInvalidRequest, "keep=%q is not a boolean", v).WithHint("use keep=true to keep the session's state and steps, or leave it out"))
			return
		}
		if keep {
			info, err := s.engine(r).CloseSessionKeep(r.Context(), id)
			if err != nil {
				s.fail(w, r, sessionError(id, err))
				return
			}
			writeJSON(w, http.StatusOK, apiwire.SessionToAPI(info))
			return
		}
	}
	if err := s.engine(r).CloseSession(id); err != nil {
		s.fail(w, r, sessionError(id, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// sessionError gives "no such session" a message and hint for people; other errors pass.
func sessionError(id string, err error) error {
	if !errors.Is(err, sandbox.ErrNotFound) {
		return err
	}
	return sandbox.Errorf(sandbox.KindNotFound, "no open session %q", id).
		WithHint("it was closed, expired after its idle timeout, or never created; GET /v1/sessions lists the open ones")
}
