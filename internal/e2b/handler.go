package e2b

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/e2b/e2bwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Engine is what the E2B front door needs of the core: the engine as one caller sees it
// (*sandbox.Manager and *sandbox.Audited are Engines; the daemon passes the audited one, so that
// E2B's sandboxes and runs are in the audit log as agentbox's own are).
type Engine interface {
	As(sandbox.Caller) *sandbox.View
}

// Template is what an E2B template id stands for in agentbox: the tier and image of the sandbox.
type Template struct {
	Tier  sandbox.Tier
	Image string
}

// Options configure the E2B front door. Zero values take the documented defaults.
type Options struct {
	// Engine is the core. Required.
	Engine Engine
	// Keys authenticates the SDK's API key (X-API-Key): the daemon's keys. Required.
	Keys *auth.Keys
	// TokenSecret keys the sandboxes' access tokens (HMAC). Required; the daemon derives it from
	// its own key, so tokens stay valid across restarts and change when the key does.
	TokenSecret []byte
	// Domain is the E2B domain the SDKs are pointed at (E2B_DOMAIN): "api.<domain>" and
	// "<port>-<sandbox id>.<domain>" are this front door's names. Empty: no names of its own, the
	// control plane at any name and sandboxes chosen by the SDK's E2b-Sandbox-Id header (a
	// listener of its own, E2B_API_URL and E2B_SANDBOX_URL pointed at it).
	Domain string
	// Templates maps E2B template ids to tiers and images. Required: the daemon's wiring holds
	// the defaults ("base" and "code-interpreter-v1" are the heavy tier's data-science image).
	Templates map[string]Template
	// Services serve the ports inside a sandbox (e2bwire.EnvdPort: internal/e2b/envd,
	// e2bwire.InterpPort: internal/e2b/interp). A request to another port, or to a port whose
	// service is nil, is answered not_implemented naming the call.
	Services map[int]http.Handler
	// DefaultTimeout is a sandbox's life when create names none (E2B's default, 300s);
	// MaxTimeout bounds what create, connect and setTimeout may ask (default 24h, E2B's longest).
	DefaultTimeout, MaxTimeout time.Duration
	// StateFile keeps what E2B knows of the sandboxes beyond their sessions (template, metadata,
	// timeout) across restarts, as the sessions are kept. Empty: in memory only.
	StateFile string
	// MaxBodyBytes bounds a control-plane request body. Default 1 MiB.
	MaxBodyBytes int64
	// Logger receives internal errors and the timeout reaper's actions. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Handler is the E2B front door, an http.Handler. Close stops its timeout reaper.
type Handler struct {
	eng       Engine
	keys      *auth.Keys
	tok       tokens
	domain    string
	templates map[string]Template
	services  map[int]http.Handler
	defTO     time.Duration
	maxTO     time.Duration
	maxBody   int64
	log       *slog.Logger
	now       func() time.Time

	mu        sync.Mutex
	sandboxes map[string]*record // by session id
	stateFile string
	saveMu    sync.Mutex // serialises writes of stateFile

	// debugMu guards debugSession, the session of the SDKs' debug mode's sandbox (debug.go).
	debugMu      sync.Mutex
	debugSession string

	serve http.Handler // dispatch behind withRequest

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Interface guards.
var _ http.Handler = (*Handler)(nil)

// New builds the front door and starts its timeout reaper (Close stops it).
func New(opts Options) (*Handler, error) {
	switch {
	case opts.Engine == nil:
		return nil, errors.New("e2b: an engine is required")
	case opts.Keys == nil:
		return nil, errors.New("e2b: keys are required")
	case len(opts.TokenSecret) < 16:
		return nil, errors.New("e2b: a token secret of at least 16 bytes is required")
	case len(opts.Templates) == 0:
		return nil, errors.New("e2b: at least one template is required")
	}
	if opts.DefaultTimeout <= 0 {
		opts.DefaultTimeout = 300 * time.Second
	}
	if opts.MaxTimeout <= 0 {
		opts.MaxTimeout = 24 * time.Hour
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	h := &Handler{
		eng: opts.Engine, keys: opts.Keys, tok: tokens{auth.SandboxTokens{Secret: opts.TokenSecret}},
		domain:    strings.TrimSuffix(strings.ToLower(opts.Domain), "."),
		templates: opts.Templates, services: opts.Services,
		defTO: opts.DefaultTimeout, maxTO: opts.MaxTimeout, maxBody: opts.MaxBodyBytes,
		log: opts.Logger, now: opts.Now,
		sandboxes: map[string]*record{}, stateFile: opts.StateFile,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if err := h.load(); err != nil {
		return nil, err
	}
	h.serve = h.withRequest(http.HandlerFunc(h.dispatch))
	go h.reap()
	return h, nil
}

// Close stops the timeout reaper. It leaves the sandboxes to the engine.
func (h *Handler) Close() error {
	h.once.Do(func() { close(h.stop) })
	<-h.done
	return nil
}

// ServeHTTP sends r to the control plane or to a service of a sandbox (addressOf), with a request
// id and a log line (request.go).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.serve.ServeHTTP(w, r) }

func (h *Handler) dispatch(w http.ResponseWriter, r *http.Request) {
	a, ok := h.addressOf(r)
	switch {
	case !ok:
		h.fail(w, r, sandbox.Errorf(sandbox.KindNotFound, "%s is not an E2B host name of this daemon", hostOnly(r.Host)).
			WithHint("the control plane is api.%s and a sandbox's port is <port>-<sandbox id>.%s", h.domain, h.domain))
	case a.control:
		h.control(w, r)
	default:
		h.service(w, r, a)
	}
}

// fail answers err in E2B's error format, logging an internal error first.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	if sandbox.KindOf(err) == sandbox.KindInternal {
		h.log.Error("e2b: internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	e2bwire.WriteError(w, err)
}

// identity authenticates the control plane's caller: the SDK sends its key as X-API-Key; an
// agentbox client's "Authorization: Bearer" works too.
func (h *Handler) identity(r *http.Request) (auth.Identity, error) {
	key := auth.RequestKey(r)
	if key == "" {
		return auth.Identity{}, sandbox.Errorf(sandbox.KindUnauthorized, "this E2B call needs an API key").
			WithHint("set E2B_API_KEY to an agentbox key (the daemon's api_key, or one from agentbox keys create --scopes sessions,files,run)")
	}
	return h.keys.Authenticate(key, h.now())
}

// service resolves a request for a port of a sandbox to its session and caller, and hands it to
// the port's service. Who asks is the key the sandbox's access token was issued to (or an API key
// sent as on the control plane); a sandbox the caller cannot see is answered as E2B's edge
// answers a sandbox that is not running (502), which the SDKs read as "not running".
func (h *Handler) service(w http.ResponseWriter, r *http.Request, a address) {
	h.serviceAs(w, r, a, nil)
}

// serviceAs is service; a request without credentials acts as debugAs when it is set (the
// debug listeners, debug.go, after their check of the connecting process).
func (h *Handler) serviceAs(w http.ResponseWriter, r *http.Request, a address, debugAs *auth.Identity) {
	sessionID, err := e2bwire.SessionID(a.sandboxID)
	if err != nil {
		h.sandboxGone(w, a.sandboxID)
		return
	}
	var id auth.Identity
	if debugAs != nil && !hasCredentials(r) {
		id = *debugAs
	} else if id, err = h.serviceIdentity(r, sessionID); err != nil {
		h.fail(w, r, err)
		return
	}
	if err := id.Allows("a sandbox's services", auth.ScopeSessions); err != nil {
		h.fail(w, r, err)
		return
	}
	if _, err := h.eng.As(id.Caller).Session(sessionID); err != nil {
		if sandbox.KindOf(err) == sandbox.KindNotFound {
			h.sandboxGone(w, a.sandboxID)
			return
		}
		h.fail(w, r, err)
		return
	}
	svc := h.services[a.port]
	if svc == nil {
		h.fail(w, r, e2bwire.NotImplemented(serviceCall(r, a.port)))
		return
	}
	t := e2bwire.Target{SandboxID: a.sandboxID, SessionID: sessionID, Port: a.port, Identity: id}
	svc.ServeHTTP(w, r.WithContext(e2bwire.WithTarget(r.Context(), t)))
}

// serviceCall names an in-sandbox request for a not_implemented error.
func serviceCall(r *http.Request, port int) string {
	switch port {
	case e2bwire.EnvdPort:
		return r.Method + " " + r.URL.Path + " (envd, port 49983)"
	case e2bwire.InterpPort:
		return r.Method + " " + r.URL.Path + " (code interpreter, port 49999)"
	}
	return r.Method + " " + r.URL.Path + " on port " + itoa(port) + " inside a sandbox (agentbox sandboxes serve only envd's port 49983 and the code interpreter's 49999)"
}

// hasCredentials reports whether r carries an access token or an API key.
func hasCredentials(r *http.Request) bool {
	for _, hd := range []string{"X-Access-Token", "E2B-Traffic-Access-Token", "X-API-Key", "Authorization"} {
		if r.Header.Get(hd) != "" {
			return true
		}
	}
	return false
}

// serviceIdentity checks the credential of an in-sandbox request.
func (h *Handler) serviceIdentity(r *http.Request, sessionID string) (auth.Identity, error) {
	for _, hd := range []string{"X-Access-Token", "E2B-Traffic-Access-Token"} {
		if tok := r.Header.Get(hd); tok != "" {
			keyID, ok := h.tok.check(sessionID, tok)
			if !ok {
				return auth.Identity{}, sandbox.Errorf(sandbox.KindUnauthorized, "the sandbox's access token (%s) is not valid for this sandbox", hd).
					WithHint("use the sandbox object Sandbox.create or Sandbox.connect returned; a token from before the daemon's key changed is no longer valid: connect again")
			}
			return h.keys.IdentityOfKey(keyID, h.now())
		}
	}
	if r.Header.Get("X-API-Key") != "" || r.Header.Get("Authorization") != "" {
		return h.identity(r)
	}
	if id, ok, err := h.signedFile(r, sessionID); ok {
		return id, err
	}
	return auth.Identity{}, sandbox.Errorf(sandbox.KindUnauthorized, "a request to a sandbox needs its access token").
		WithHint("the SDKs send it (X-Access-Token) from the sandbox Sandbox.create or Sandbox.connect returned; by hand, send X-API-Key with an agentbox key")
}

// sandboxGone answers as E2B's edge does for a sandbox that is not running: 502, which the SDKs'
// isRunning reads as false.
func (h *Handler) sandboxGone(w http.ResponseWriter, sandboxID string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadGateway)
	_, _ = w.Write([]byte(`{"code":502,"message":"sandbox ` + jsonEscape(sandboxID) + ` not found","sandboxId":"` + jsonEscape(sandboxID) + `"}`))
}

// reap ends the sandboxes whose E2B timeout passed: killed, or paused when they were created with
// autoPause (E2B's lifecycle.onTimeout "pause").
func (h *Handler) reap() {
	defer close(h.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-tick.C:
		}
		for _, rec := range h.expired() {
			v := h.eng.As(rec.caller)
			var err error
			if rec.autoPause {
				_, err = v.Pause(context.Background(), rec.sessionID)
			} else {
				err = v.CloseSession(rec.sessionID)
				h.forget(rec.sessionID)
			}
			if sandbox.KindOf(err) == sandbox.KindNotFound {
				h.forget(rec.sessionID) // ended by other means: its record goes too
				continue
			}
			if err != nil {
				h.log.Warn("e2b: ending a sandbox at its timeout", "session", rec.sessionID, "pause", rec.autoPause, "err", err)
			} else {
				h.log.Info("e2b: sandbox timed out", "session", rec.sessionID, "paused", rec.autoPause)
			}
		}
	}
}
