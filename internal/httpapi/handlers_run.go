package httpapi

import (
	"net/http"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// POST /v1/run
func (s *API) handleRun(w http.ResponseWriter, r *http.Request) {
	var in api.RunRequest
	if err := decode(w, r, s.maxBody, &in, false); err != nil {
		s.fail(w, r, err)
		return
	}
	req, err := apiwire.RunRequestFromAPI(in)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	es := s.startStream(w, r, &req)
	res, err := s.engine(r).Run(r.Context(), &req)
	s.answerRun(w, r, es, string(req.Tier), res, err)
}

// POST /v1/route
func (s *API) handleRoute(w http.ResponseWriter, r *http.Request) {
	var in api.RunRequest
	if err := decode(w, r, s.maxBody, &in, false); err != nil {
		s.fail(w, r, err)
		return
	}
	req, err := apiwire.RunRequestFromAPI(in)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d, err := s.engine(r).Route(&req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiwire.RoutingToAPI(d))
}

// POST /v1/sessions/{id}/run
func (s *API) handleRunInSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var in api.RunRequest
	if err := decode(w, r, s.maxBody, &in, false); err != nil {
		s.fail(w, r, err)
		return
	}
	req, err := apiwire.SessionRunRequestFromAPI(in)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	es := s.startStream(w, r, &req)
	res, err := s.engine(r).RunInSession(r.Context(), id, &req)
	s.answerRun(w, r, es, string(req.Tier), res, sessionError(id, err))
}

// startStream gives req a sink that streams its output to the client, when the request's Accept
// header asks for a stream; it returns nil for the JSON answer.
func (s *API) startStream(w http.ResponseWriter, r *http.Request, req *sandbox.RunRequest) *eventStream {
	format := streamFormat(r)
	if format == "" {
		return nil
	}
	es := newEventStream(w, format)
	req.Output = es
	return es
}

// answerRun writes a run's result, or its error with the partial result, and counts it.
// requested is the tier the request named, used for the labels when no result says better. es,
// when set, is the run's event stream: the answer goes on as its last events, unless nothing was
// streamed yet and the run failed (then the usual status and error body).
func (s *API) answerRun(w http.ResponseWriter, r *http.Request, es *eventStream, requested string, res *sandbox.Result, err error) {
	info := infoOf(r)
	partial := res
	if err != nil {
		if e := sandbox.AsError(err); e.Result != nil {
			partial = e.Result
		}
	}
	info.runtime = requested
	if partial != nil && partial.Runtime != "" {
		info.runtime = string(partial.Runtime)
	}
	if !s.tiers[info.runtime] {
		// Keep the label set bounded: names from requests that are no tier of the engine ("auto",
		// a typo) are not series.
		info.runtime = "none"
	}
	id, _ := auth.IdentityOf(r.Context())
	s.metrics.observeRun(info.runtime, id.Tenant, partial, err)
	if err != nil {
		if e := sandbox.AsError(err); e.Result == nil && partial != nil {
			// A runtime that returned its partial result beside the error, not inside it.
			cp := *e
			cp.Result = partial
			err = &cp
		}
	}
	if es != nil {
		if started := es.finish(); started || err == nil {
			var body api.ErrorResponse
			if err != nil {
				_, body = s.errorBody(r, err)
			}
			es.end(res, body, err)
			return
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiwire.ResultToAPI(res))
}
