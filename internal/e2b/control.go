package e2b

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/e2b/e2bwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The control plane: E2B's REST API (spec/openapi.yml of e2b-dev/E2B) as the SDKs call it. Every
// route but GET /health needs an API key (X-API-Key) with the sessions scope.

// call is a control-plane request: its route (method and path pattern, as E2B's spec names it)
// and the SDK method that makes it, for not_implemented errors and the docs' table.
type call struct {
	method, pattern, sdk string
	serve                func(h *Handler, w http.ResponseWriter, r *http.Request, c *callCtx)
}

// callCtx is a control-plane request after authentication.
type callCtx struct {
	id        auth.Identity
	v         *sandbox.View
	sandboxID string // the {sandboxID} of the path, if any
}

// calls lists the control-plane calls the SDKs make: those served and those answered
// not_implemented (serve nil). docs/E2B.md is the same table.
var calls = []call{
	{"POST", "/v2/sandboxes", "Sandbox.create", (*Handler).create},
	{"POST", "/sandboxes", "Sandbox.create (SDK v1)", (*Handler).create},
	{"GET", "/v2/sandboxes", "Sandbox.list", (*Handler).list},
	{"GET", "/sandboxes", "Sandbox.list (SDK v1)", (*Handler).listV1},
	{"GET", "/sandboxes/{sandboxID}", "Sandbox.getInfo", (*Handler).get},
	{"DELETE", "/sandboxes/{sandboxID}", "Sandbox.kill", (*Handler).kill},
	{"POST", "/sandboxes/{sandboxID}/timeout", "Sandbox.setTimeout", (*Handler).setTimeout},
	{"POST", "/sandboxes/{sandboxID}/refreshes", "Sandbox.refresh (Python SDK)", (*Handler).refresh},
	{"POST", "/sandboxes/{sandboxID}/pause", "Sandbox.pause", (*Handler).pause},
	{"POST", "/sandboxes/{sandboxID}/resume", "Sandbox.resume (SDK v1)", (*Handler).resume},
	{"POST", "/v2/sandboxes/{sandboxID}/connect", "Sandbox.connect", (*Handler).connect},
	{"POST", "/sandboxes/{sandboxID}/connect", "Sandbox.connect (SDK v1)", (*Handler).connect},
	{"GET", "/sandboxes/{sandboxID}/metrics", "Sandbox.getMetrics", nil},
	{"GET", "/sandboxes/metrics", "Sandbox.getMetrics of several sandboxes", nil},
	{"GET", "/sandboxes/{sandboxID}/logs", "sandbox logs", nil},
	{"GET", "/v2/sandboxes/{sandboxID}/logs", "sandbox logs", nil},
	{"PUT", "/sandboxes/{sandboxID}/network", "Sandbox.updateNetwork", nil},
	{"POST", "/sandboxes/{sandboxID}/fork", "Sandbox.fork", nil},
	{"POST", "/sandboxes/{sandboxID}/snapshots", "Sandbox.createSnapshot", nil},
	{"GET", "/snapshots", "Sandbox.listSnapshots", nil},
	{"DELETE", "/templates/{templateID}", "Sandbox.deleteSnapshot / Template.delete", nil},
}

// control serves the control plane.
func (h *Handler) control(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	if r.Method == http.MethodGet && path == "/health" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"message":"ok"}` + "\n"))
		return
	}
	id, err := h.identity(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for _, c := range calls {
		sandboxID, ok := match(c.pattern, path)
		if !ok || c.method != r.Method {
			continue
		}
		if c.serve == nil {
			h.fail(w, r, e2bwire.NotImplemented(c.method+" "+c.pattern+" ("+c.sdk+")"))
			return
		}
		if err := id.Allows("the E2B control plane", auth.ScopeSessions); err != nil {
			h.fail(w, r, err)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, h.maxBody)
		c.serve(h, w, r, &callCtx{id: id, v: h.eng.As(id.Caller), sandboxID: sandboxID})
		return
	}
	h.fail(w, r, e2bwire.NotImplemented(r.Method+" "+path))
}

// match matches path against a pattern with at most one {placeholder}, returning its value.
func match(pattern, path string) (string, bool) {
	ps, qs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(qs) {
		return "", false
	}
	val := ""
	for i := range ps {
		switch {
		case strings.HasPrefix(ps[i], "{"):
			if qs[i] == "" {
				return "", false
			}
			val = qs[i]
		case ps[i] != qs[i]:
			return "", false
		}
	}
	return val, true
}

// decode reads a JSON body into v; an empty body leaves v as it is.
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return sandbox.Errorf(sandbox.KindInvalidRequest, "the request body is over %d bytes", mb.Limit)
		}
		return sandbox.Errorf(sandbox.KindInvalidRequest, "reading the request body: %v", err)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return sandbox.Errorf(sandbox.KindInvalidRequest, "the request body is not the JSON E2B's API expects: %v", err)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// timeoutOf turns E2B's timeout in seconds into a duration: nil is def, and it is bounded.
func (h *Handler) timeoutOf(secs *int64, def time.Duration) (time.Duration, error) {
	if secs == nil {
		return def, nil
	}
	d := time.Duration(*secs) * time.Second
	if *secs < 0 || d > h.maxTO {
		return 0, sandbox.Errorf(sandbox.KindInvalidRequest, "timeout %ds is out of range: at most %ds (%v)", *secs, int64(h.maxTO/time.Second), h.maxTO).
			WithHint("ask for a shorter timeout and extend it with setTimeout while the sandbox is in use")
	}
	return d, nil
}
