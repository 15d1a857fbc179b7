package webui

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Engine is what the console needs of the core: the engine as one caller sees it.
// *sandbox.Manager and *sandbox.Audited are ones; the daemon, which builds both, says so.
type Engine interface {
	As(sandbox.Caller) *sandbox.View
}

// View is what the console calls on the engine as the logged-in caller sees it (a
// *sandbox.View): the sessions and their steps, their artifacts and the audit log. Another
// tenant's things are not found there, so the console has no ownership rules of its own.
type View interface {
	Steps
	Sessions() []sandbox.SessionInfo
	Session(id string) (sandbox.SessionInfo, error)
	Artifact(id string) (sandbox.Artifact, io.ReadSeekCloser, error)
	QueryAudit(ctx context.Context, f sandbox.AuditFilter) ([]json.RawMessage, error)
	// Runtime is a tier's runtime, whose Capabilities say which buttons a session's pages offer.
	Runtime(t sandbox.Tier) (sandbox.Runtime, bool)
}

// Interface guards.
var _ View = (*sandbox.View)(nil)

// AuditCheck is what a verification of the whole audit log found (internal/audit's Verify,
// which the daemon runs on the console's behalf).
type AuditCheck struct {
	OK          bool
	Records     int64
	Checkpoints int
	// LastSigned is the time of the last checkpoint whose signature verifies, and LastSize the
	// records it covers; Unsigned counts the records after it, vouched for by the chain only.
	LastSigned time.Time
	LastSize   int64
	Unsigned   int64
	// Summary is the verifier's one line ("N records, M checkpoints ...; ok" or "FAILED: ...").
	Summary string
	// Problems are the signs of tampering, first first; Warnings are oddities that are not.
	Problems []string
	Warnings []string
}

// Options configure the console. Zero values take the documented defaults.
type Options struct {
	// Engine answers each request as its caller sees it. Required.
	Engine Engine
	// Keys authenticate logins and, again, every request of a UI session: the same keys as the
	// HTTP API (auth.NewKeys). Required.
	Keys *auth.Keys
	// VerifyAudit checks the whole audit log; nil when the daemon has none (audit off), and the
	// audit page says so.
	VerifyAudit func(ctx context.Context) (AuditCheck, error)
	// IdleTimeout ends a UI session after this long without a request. Default 30 minutes.
	IdleTimeout time.Duration
	// MaxAge ends a UI session this long after its login, whatever its use. Default 12 hours.
	MaxAge time.Duration
	// MaxSessions bounds the UI sessions kept at once; past it the least recently used is
	// dropped. Default 10000.
	MaxSessions int
	// SessionsFile keeps the UI sessions (logins) across a daemon restart: the SHA-256 of each
	// cookie's id, the digest of its API key (never the key) and its times, mode 0600. "" keeps
	// them in memory only.
	SessionsFile string
	// SharedLogins, when set, keeps each UI session in a file of its own in this directory,
	// which the nodes of a cluster share: a login on one node is valid on every node, a logout
	// on one ends it on all (each request checks its file), so the gateway can send a session's
	// pages to the node that holds it. It replaces SessionsFile.
	SharedLogins string
	// Others, when set, lists the sessions the caller may see that other nodes of the cluster
	// hold (from the shared store): the sessions page shows them beside this node's, each linking
	// to its pages, which the gateway serves from its node.
	Others func(ctx context.Context, c sandbox.Caller) []sandbox.SessionInfo
	// LoginLimit bounds failed logins (rate.go). Zero fields take the defaults.
	LoginLimit LoginLimit
	// Version is shown in the page footer. Default "dev".
	Version string
	// Logger receives logins, refusals and internal errors. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Prefix is where the daemon mounts the console.
const Prefix = "/ui/"

// UI is the web console, an http.Handler for everything under Prefix.
type UI struct {
	opts     Options
	sessions *sessionTable
	limiter  *loginLimiter
	pages    *pages
	mux      *http.ServeMux
	log      *slog.Logger
	verify   *verifyCache
	// inspections keeps what steps held, read once (steps.go).
	inspections *inspections
}

// New builds the console.
func New(opts Options) (*UI, error) {
	if opts.Engine == nil {
		return nil, errors.New("webui: an Engine is required")
	}
	if opts.Keys == nil {
		return nil, errors.New("webui: Keys are required")
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 30 * time.Minute
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = 12 * time.Hour
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 10000
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	p, err := loadPages()
	if err != nil {
		return nil, err
	}
	u := &UI{
		opts:     opts,
		sessions: newSessionTable(opts.IdleTimeout, opts.MaxAge, opts.MaxSessions, opts.Now, opts.SessionsFile, opts.Logger).shared(opts.SharedLogins),
		limiter:  newLoginLimiter(opts.LoginLimit, opts.Now),
		pages:    p,
		log:      opts.Logger,
		verify:   &verifyCache{check: opts.VerifyAudit, now: opts.Now},

		inspections: newInspections(),
	}
	u.mux = u.routes()
	return u, nil
}

// routes lists the console's pages. GET pages need a UI session (else they redirect to the
// login); every POST but the login needs the session and its token.
func (u *UI) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /ui/static/", u.static())
	mux.HandleFunc("GET /ui/login", u.loginPage)
	mux.HandleFunc("POST /ui/login", u.login)
	mux.Handle("POST /ui/logout", u.change(u.logout))
	mux.Handle("GET /ui/{$}", u.page(func(w http.ResponseWriter, r *http.Request, c *call) {
		http.Redirect(w, r, "/ui/sessions", http.StatusSeeOther)
	}))
	mux.Handle("GET /ui/sessions", u.page(u.sessionsPage))
	mux.Handle("GET /ui/sessions/{id}", u.page(u.sessionPage))
	mux.Handle("GET /ui/sessions/{id}/steps/{step}", u.page(u.stepPage))
	mux.Handle("GET /ui/sessions/{id}/steps/{step}/outputs/{n}", u.page(u.outputHTML))
	mux.Handle("POST /ui/sessions/{id}/rewind", u.change(u.rewind))
	mux.Handle("POST /ui/sessions/{id}/fork", u.change(u.fork))
	mux.Handle("POST /ui/sessions/{id}/pause", u.change(u.pause))
	mux.Handle("POST /ui/sessions/{id}/resume", u.change(u.resume))
	mux.Handle("GET /ui/artifacts/{id}", u.page(u.artifact))
	mux.Handle("GET /ui/audit", u.page(u.auditPage))
	mux.Handle("POST /ui/audit/verify", u.change(u.verifyNow))
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		u.errorPage(w, r, nil, http.StatusNotFound, "No such page", "There is no page "+r.Method+" "+r.URL.Path+".")
	})
	return mux
}

// ServeHTTP serves the console: every answer gets the security headers first.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header(), strings.HasPrefix(r.URL.Path, "/ui/static/"))
	if r.URL.Path == "/ui" {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	u.mux.ServeHTTP(w, r)
}
