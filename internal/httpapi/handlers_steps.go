package httpapi

import (
	"errors"
	"net/http"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// GET /v1/sessions/{id}/steps
func (s *API) handleListSteps(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	steps, head, err := s.engine(r).Steps(id)
	if err != nil {
		s.fail(w, r, stepError(id, err))
		return
	}
	writeJSON(w, http.StatusOK, apiwire.StepsToAPI(steps, head))
}

// GET /v1/sessions/{id}/steps/{step}
func (s *API) handleGetStep(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st, err := s.engine(r).Step(id, r.PathValue("step"))
	if err != nil {
		s.fail(w, r, stepError(id, err))
		return
	}
	writeJSON(w, http.StatusOK, apiwire.StepToAPI(st))
}

// GET /v1/sessions/{id}/steps/{step}/inspect?context=
func (s *API) handleInspectStep(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	in, err := s.engine(r).InspectStepIn(r.Context(), id, r.PathValue("step"), r.URL.Query().Get("context"))
	if err != nil {
		s.fail(w, r, stepError(id, err))
		return
	}
	writeJSON(w, http.StatusOK, apiwire.InspectionToAPI(in))
}

// GET /v1/sessions/{id}/steps/{step}/diff?base=&context=
func (s *API) handleDiffSteps(w http.ResponseWriter, r *http.Request) {
	id, to := r.PathValue("id"), r.PathValue("step")
	e := s.engine(r)
	// base "" is the step's parent (the core's default).
	d, err := e.DiffStepsIn(r.Context(), id, r.URL.Query().Get("base"), to, r.URL.Query().Get("context"))
	if err != nil {
		s.fail(w, r, stepError(id, err))
		return
	}
	writeJSON(w, http.StatusOK, apiwire.DiffToAPI(d))
}

// stepRequest reads the body of rewind and fork.
func (s *API) stepRequest(w http.ResponseWriter, r *http.Request) (string, bool) {
	var in api.StepRequest
	if err := decode(w, r, s.maxBody, &in, true); err != nil {
		s.fail(w, r, err)
		return "", false
	}
	if in.Step == "" {
		s.fail(w, r, sandbox.Errorf(sandbox.KindInvalidRequest, "step is required").
			WithHint("name one of the session's steps: GET /v1/sessions/%s/steps lists them", r.PathValue("id")))
		return "", false
	}
	return in.Step, true
}

// POST /v1/sessions/{id}/rewind
func (s *API) handleRewind(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	step, ok := s.stepRequest(w, r)
	if !ok {
		return
	}
	e := s.engine(r)
	if _, err := e.Rewind(r.Context(), id, step); err != nil {
		s.fail(w, r, stepError(id, err))
		return
	}
	info, err := e.Session(id)
	if err != nil {
		s.fail(w, r, stepError(id, err))
		return
	}
	writeJSON(w, http.StatusOK, apiwire.SessionToAPI(info))
}

// POST /v1/sessions/{id}/fork
func (s *API) handleFork(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	step, ok := s.stepRequest(w, r)
	if !ok {
		return
	}
	info, err := s.engine(r).Fork(r.Context(), id, step)
	if err != nil {
		s.fail(w, r, stepError(id, err))
		return
	}
	infoOf(r).runtime = string(info.Tier)
	writeJSON(w, http.StatusCreated, apiwire.SessionToAPI(info))
}

// POST /v1/sessions/{id}/pause
func (s *API) handlePause(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	info, err := s.engine(r).Pause(r.Context(), id)
	if err != nil {
		s.fail(w, r, stepError(id, err))
		return
	}
	writeJSON(w, http.StatusOK, apiwire.SessionToAPI(info))
}

// POST /v1/sessions/{id}/resume
func (s *API) handleResume(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	info, err := s.engine(r).Resume(r.Context(), id)
	if err != nil {
		s.fail(w, r, stepError(id, err))
		return
	}
	writeJSON(w, http.StatusOK, apiwire.SessionToAPI(info))
}

// stepError is sessionError for the time-travel routes: a step that is not found keeps its own
// message (which names the step); a session that is not found gets sessionError's.
func stepError(id string, err error) error {
	var e *sandbox.Error
	if errors.As(err, &e) && e.Message != "" {
		return err
	}
	return sessionError(id, err)
}

// GET /v1/sessions/{id}/steps/{step}/files/content?path=FILE
func (s *API) handleReadStepFile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	path, err := pathParam(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	b, err := s.engine(r).ReadStepFile(r.Context(), id, r.PathValue("step"), path)
	if err != nil {
		s.fail(w, r, stepError(id, err))
		return
	}
	writeBytes(w, b)
}
