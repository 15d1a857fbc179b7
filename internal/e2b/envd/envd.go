package envd

import (
	"context"
	"encoding/base64"
	"net/http"
	"path"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/e2b/e2bwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Engine is what envd's services need of the core, as the caller sees it: *sandbox.View (the
// caller's View of the Manager, or of the audited Manager) is one, so ownership, limits and the
// audit log are those of agentbox's own API.
type Engine interface {
	RunCommand(ctx context.Context, id string, c sandbox.Command, out sandbox.OutputSink) (sandbox.CommandInfo, error)
	Commands(id string) ([]sandbox.CommandInfo, error)
	CommandStatus(id, cid string) (sandbox.CommandInfo, error)
	KillCommand(id, cid string) (sandbox.CommandInfo, error)
	WriteCommandStdin(id, cid string, p []byte) error
	CloseCommandStdin(id, cid string) error
	FollowCommand(id, cid string, out sandbox.OutputSink) (sandbox.CommandInfo, <-chan struct{}, func(), error)

	Policy() sandbox.Policy

	ReadFile(ctx context.Context, id, path string) ([]byte, error)
	WriteFile(ctx context.Context, id, path string, content []byte) error
	ListFiles(ctx context.Context, id, path string) ([]sandbox.FileInfo, error)
	RemoveFile(ctx context.Context, id, path string) error
}

// Target is the sandbox a request is for, as the front door resolved it from the host name and
// the caller's credentials: the agentbox session, and the engine as that caller sees it.
type Target struct {
	Session string
	Engine  Engine
}

// Callers is the core as the front door's callers see it: *sandbox.Manager and *sandbox.Audited
// are.
type Callers interface {
	As(sandbox.Caller) *sandbox.View
}

// Options configure the Handler.
type Options struct {
	// Engine serves each request as its caller (e2bwire.Target.Identity) sees it. Required for
	// ServeHTTP; Serve takes the engine in its Target.
	Engine Callers
	// MaxUpload bounds a POST /files body. Default 512 MiB; the Manager's file cap applies to
	// each file as well.
	MaxUpload int64
}

// Handler serves envd's protocol for one sandbox at a time (Serve's Target).
type Handler struct {
	opts     Options
	watchers *watchers
	pids     pidCache
}

// New returns a Handler.
func New(opts Options) *Handler {
	if opts.MaxUpload <= 0 {
		opts.MaxUpload = 512 << 20
	}
	return &Handler{opts: opts, watchers: newWatchers()}
}

// ServeHTTP answers a request internal/e2b resolved to a sandbox (e2bwire.TargetOf), as the
// caller it found.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t, ok := e2bwire.TargetOf(r.Context())
	if !ok || h.opts.Engine == nil {
		writeHTTPError(w, http.StatusInternalServerError, "envd: the request reached the service without its sandbox resolved")
		return
	}
	h.Serve(w, r, Target{Session: t.SessionID, Engine: h.opts.Engine.As(t.Identity.Caller)})
}

// Serve answers r, a request the SDK sent to envd's port of sandbox t.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, t Target) {
	p := r.URL.Path
	switch {
	case p == "/health":
		w.WriteHeader(http.StatusNoContent)
		return
	case p == "/files":
		h.serveFiles(w, r, t)
		return
	case (strings.HasPrefix(p, "/process.") || strings.HasPrefix(p, "/filesystem.")) && !jsonCodec(r):
		// The SDKs send JSON; binary protobuf and gRPC are not spoken (Connect's answer: 415).
		w.Header().Set("Accept-Post", "application/json, application/connect+json")
		writeHTTPError(w, http.StatusUnsupportedMediaType, "agentbox's envd speaks Connect with JSON messages (application/json, application/connect+json), not %q", r.Header.Get("Content-Type"))
		return
	case strings.HasPrefix(p, "/process.Process/"):
		h.serveProcess(w, r, t, strings.TrimPrefix(p, "/process.Process/"))
		return
	case strings.HasPrefix(p, "/filesystem.Filesystem/"):
		h.serveFilesystem(w, r, t, strings.TrimPrefix(p, "/filesystem.Filesystem/"))
		return
	}
	// envd's other HTTP endpoints: /metrics, /envs, /init and the like.
	writeHTTPError(w, http.StatusNotImplemented, "agentbox does not implement envd's %s %s: it serves /health, /files, process.Process and filesystem.Filesystem", r.Method, p)
}

// jsonCodec says whether r's messages are JSON (or it has none).
func jsonCodec(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	return ct == "" || strings.Contains(ct, "json")
}

// homeDir is the sandbox user's home, where envd resolves relative paths: agentbox's work
// directory.
const homeDir = sandbox.WorkDir

// resolve makes an E2B path absolute as envd does: relative to the user's home, "~" being it.
func resolve(p string) string {
	switch {
	case p == "" || p == "~":
		return homeDir
	case strings.HasPrefix(p, "~/"):
		p = homeDir + p[1:]
	case !strings.HasPrefix(p, "/"):
		p = homeDir + "/" + p
	}
	return path.Clean(p)
}

// userOf returns the user the SDK asks a call to run as (Authorization: Basic base64(user:)), or
// "" for the default. agentbox runs everything as the sandbox's one unprivileged user; asking for
// root is refused rather than silently ignored.
func userOf(r *http.Request) string {
	a := r.Header.Get("Authorization")
	if !strings.HasPrefix(a, "Basic ") {
		return ""
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, "Basic "))
	if err != nil {
		return ""
	}
	u, _, _ := strings.Cut(string(b), ":")
	return u
}

// checkUser refuses a call asked to run as root.
func checkUser(user string) error {
	if user == "root" {
		return errorf(codePermissionDenied, "agentbox runs sandbox processes and file operations as the sandbox's unprivileged user, not root (its sandboxes give no root to user code); leave user unset")
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
