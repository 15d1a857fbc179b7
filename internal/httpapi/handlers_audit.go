package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Query bounds of GET /v1/audit.
const (
	auditDefaultLimit = 100
	auditMaxLimit     = 1000
)

// GET /v1/audit?session=&kind=&decision=&since=&until=&limit=
func (s *API) handleAudit(w http.ResponseWriter, r *http.Request) {
	f, err := auditFilter(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	recs, err := s.engine(r).QueryAudit(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if recs == nil {
		recs = []json.RawMessage{}
	}
	writeJSON(w, http.StatusOK, api.AuditList{Records: recs})
}

// auditFilter reads the query parameters of GET /v1/audit. Unknown parameters are refused, so a
// misspelt filter does not silently return everything.
func auditFilter(q url.Values) (sandbox.AuditFilter, error) {
	f := sandbox.AuditFilter{Limit: auditDefaultLimit}
	for name, vs := range q {
		if len(vs) != 1 {
			return f, invalid("query parameter %q is given %d times", name, len(vs)).WithHint("give each filter once")
		}
		v := vs[0]
		switch name {
		case "session":
			f.Session = v
		case "kind":
			f.Kind = v
		case "decision":
			f.Decision = v
		case "tenant":
			f.Tenant = v
		case "agent":
			f.Agent = v
		case "since", "until":
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return f, invalid("%s %q is not an RFC 3339 time", name, v).WithHint("write it like 2026-11-22T08:40:00Z")
			}
			if name == "since" {
				f.Since = t
			} else {
				f.Until = t
			}
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > auditMaxLimit {
				return f, invalid("limit %q is not a number from 1 to %d", v, auditMaxLimit).
					WithHint("page back in time with until= set to the oldest record's time")
			}
			f.Limit = n
		default:
			return f, invalid("unknown query parameter %q", name).
				WithHint("GET /v1/audit takes session, kind, decision, tenant, agent, since, until and limit")
		}
	}
	return f, nil
}
