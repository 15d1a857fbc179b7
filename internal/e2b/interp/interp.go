package interp

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/agentbox-dev/agentbox/internal/e2b/e2bwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Engine is what the code interpreter needs of the core, as the caller sees it: *sandbox.View is
// one, so runs are the caller's, limited, governed and audited as agentbox's own.
type Engine interface {
	RunInSession(ctx context.Context, id string, req *sandbox.RunRequest) (*sandbox.Result, error)
	RunCommand(ctx context.Context, id string, c sandbox.Command, out sandbox.OutputSink) (sandbox.CommandInfo, error)
	Artifact(id string) (sandbox.Artifact, io.ReadSeekCloser, error)
	Session(id string) (sandbox.SessionInfo, error)
	CreateSession(ctx context.Context, opts sandbox.SessionOptions) (sandbox.SessionInfo, error)
	CloseSession(id string) error
	Policy() sandbox.Policy
	Capabilities(t sandbox.Tier) (sandbox.Capabilities, bool)
}

// Callers is the core as the front door's callers see it: *sandbox.Manager and *sandbox.Audited
// are.
type Callers interface {
	As(sandbox.Caller) *sandbox.View
}

// Target is the sandbox a request is for, and the engine as its caller sees it.
type Target struct {
	Session string
	Engine  Engine
}

// Options configure the Handler.
type Options struct {
	// Engine serves each request as its caller (e2bwire.Target.Identity) sees it. Required for
	// ServeHTTP; Serve takes the engine in its Target.
	Engine Callers
	// MaxContexts bounds the contexts one sandbox may have besides its default one. They cost
	// a namespace each in the sandbox's interpreter, which holds at most sandbox.MaxContexts (the
	// default).
	MaxContexts int
}

// Handler serves the code interpreter's port of E2B sandboxes.
type Handler struct {
	opts Options

	mu sync.Mutex
	// contexts are the contexts created in each sandbox, by the sandbox's session id.
	contexts map[string]*sandboxContexts
}

// New returns a Handler.
func New(opts Options) *Handler {
	if opts.MaxContexts <= 0 || opts.MaxContexts > sandbox.MaxContexts {
		opts.MaxContexts = sandbox.MaxContexts
	}
	return &Handler{opts: opts, contexts: map[string]*sandboxContexts{}}
}

// ServeHTTP answers a request internal/e2b resolved to a sandbox (e2bwire.TargetOf), as the
// caller it found.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t, ok := e2bwire.TargetOf(r.Context())
	if !ok || h.opts.Engine == nil {
		e2bwire.WriteError(w, sandbox.Errorf(sandbox.KindInternal, "the code interpreter got a request without its sandbox resolved"))
		return
	}
	h.Serve(w, r, Target{Session: t.SessionID, Engine: h.opts.Engine.As(t.Identity.Caller)})
}

// Serve answers r, a request the SDK sent to the code interpreter's port of sandbox t.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, t Target) {
	p := r.URL.Path
	switch {
	case p == "/health" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, "OK")
	case p == "/execute" && r.Method == http.MethodPost:
		h.execute(w, r, t)
	case p == "/contexts" && r.Method == http.MethodPost:
		h.createContext(w, r, t)
	case p == "/contexts" && r.Method == http.MethodGet:
		h.listContexts(w, r, t)
	case strings.HasPrefix(p, "/contexts/") && strings.HasSuffix(p, "/restart") && r.Method == http.MethodPost:
		h.restartContext(w, r, t, strings.TrimSuffix(strings.TrimPrefix(p, "/contexts/"), "/restart"))
	case strings.HasPrefix(p, "/contexts/") && r.Method == http.MethodDelete:
		h.removeContext(w, r, t, strings.TrimPrefix(p, "/contexts/"))
	default:
		e2bwire.WriteError(w, e2bwire.NotImplemented(r.Method+" "+p+" (code interpreter, port 49999)"))
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decode reads a small JSON request body into v.
func decode(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 8<<20+1))
	if err != nil {
		return sandbox.Errorf(sandbox.KindInvalidRequest, "reading the request: %v", err)
	}
	if len(b) > 8<<20 {
		return sandbox.Errorf(sandbox.KindInvalidRequest, "the request is over 8 MiB").WithHint("put large inputs in files (Sandbox.files.write) and read them from the code")
	}
	if len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return sandbox.Errorf(sandbox.KindInvalidRequest, "the request is not the JSON the call takes: %v", err)
	}
	return nil
}

// Interface guards
var (
	_ http.Handler = (*Handler)(nil)
	_ Engine       = (*sandbox.View)(nil)
	_ Callers      = (*sandbox.Manager)(nil)
	_ Callers      = (*sandbox.Audited)(nil)
)
