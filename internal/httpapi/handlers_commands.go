package httpapi

import (
	"errors"
	"net/http"
	"strings"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// POST /v1/sessions/{id}/commands
func (s *API) handleRunCommand(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var in api.CommandRequest
	if err := decode(w, r, s.maxBody, &in, false); err != nil {
		s.fail(w, r, err)
		return
	}
	c, err := apiwire.CommandFromAPI(in)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var es *eventStream
	var out sandbox.OutputSink
	if format := streamFormat(r); format != "" && !c.Background {
		es = newEventStream(w, format)
		out = es
	}
	info, err := s.engine(r).RunCommand(r.Context(), id, c, out)
	err = sessionError(id, err)
	if es != nil {
		if started := es.finish(); started || err == nil {
			if err != nil {
				_, body := s.errorBody(r, err)
				es.event(api.StreamEvent{Type: api.EventError, Error: &body.Error})
				return
			}
			wire := apiwire.CommandToAPI(info)
			es.event(api.StreamEvent{Type: api.EventExit, Command: &wire})
			return
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if c.Background {
		status = http.StatusAccepted
	}
	writeJSON(w, status, apiwire.CommandToAPI(info))
}

// GET /v1/sessions/{id}/commands
func (s *API) handleListCommands(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	cs, err := s.engine(r).Commands(id)
	if err != nil {
		s.fail(w, r, sessionError(id, err))
		return
	}
	out := api.CommandList{Commands: make([]api.Command, 0, len(cs))}
	for _, c := range cs {
		out.Commands = append(out.Commands, apiwire.CommandToAPI(c))
	}
	writeJSON(w, http.StatusOK, out)
}

// GET /v1/sessions/{id}/commands/{cid}
func (s *API) handleGetCommand(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c, err := s.engine(r).CommandStatus(id, r.PathValue("cid"))
	if err != nil {
		s.fail(w, r, commandError(id, r.PathValue("cid"), err))
		return
	}
	writeJSON(w, http.StatusOK, apiwire.CommandToAPI(c))
}

// DELETE /v1/sessions/{id}/commands/{cid}
func (s *API) handleKillCommand(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c, err := s.engine(r).KillCommand(id, r.PathValue("cid"))
	if err != nil {
		s.fail(w, r, commandError(id, r.PathValue("cid"), err))
		return
	}
	writeJSON(w, http.StatusOK, apiwire.CommandToAPI(c))
}

// commandError says which was not found: the session, or a command of an open session.
func commandError(id, cid string, err error) error {
	if errors.Is(err, sandbox.ErrNotFound) && strings.HasPrefix(err.Error(), "command ") {
		return sandbox.Errorf(sandbox.KindNotFound, "session %s has no command %q", id, cid).
			WithHint("GET /v1/sessions/{id}/commands lists the commands it keeps (the %d latest)", sandbox.MaxCommands)
	}
	return sessionError(id, err)
}
