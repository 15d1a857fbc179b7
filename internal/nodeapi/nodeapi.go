package nodeapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/audit"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Engine is what the node's endpoints ask of the Manager.
type Engine interface {
	// Load is what the node holds now, per tier (sandbox.Manager.Load).
	Load() (tiers []sandbox.TierLoad, sessions, maxSessions int)
}

// Options configure the node's endpoints.
type Options struct {
	// ID is the node's id; Addr the base URL it advertises.
	ID, Addr string
	// Version is reported in NodeInfo. Default "dev".
	Version string
	// Started is when the node started. Default: when New was called.
	Started time.Time
	// Engine is the node's Manager; nil reports no tiers.
	Engine Engine
	// Keys checks API keys (an admin key may call the node's endpoints).
	Keys *auth.Keys
	// Token is the cluster token; "" accepts admin keys only.
	Token string
	// AuditKey is the verifier key of the node's audit log; "" when it keeps none.
	AuditKey string
	// Prove proves the inclusion of record seq of the node's audit log (audit.Prove, signing a
	// checkpoint first when the record is newer than the last). Nil: the node keeps no log.
	Prove func(ctx context.Context, seq int64) (*audit.Proof, error)
	// Draining says whether the node stopped taking new work. Nil: never (or Mover's).
	Draining func() bool
	// Mover and Owners, both set, serve POST /v1/node/adopt and /v1/node/drain (adopt.go).
	Mover  Mover
	Owners Owners
	Logger *slog.Logger
}

// Handler serves the node's endpoints.
type Handler struct {
	opts   Options
	client *http.Client // asks other nodes whether they are there (adopt.go)
	bearer *auth.Bearer
	token  [32]byte
	mux    *http.ServeMux
}

// Interface guards.
var _ http.Handler = (*Handler)(nil)

// New builds the node's endpoints.
func New(opts Options) *Handler {
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Started.IsZero() {
		opts.Started = time.Now()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Draining == nil && opts.Mover != nil {
		opts.Draining = opts.Mover.Draining
	}
	h := &Handler{opts: opts, bearer: auth.NewBearerFor(opts.Keys), mux: http.NewServeMux(),
		client: &http.Client{Timeout: ownerCheckTimeout}}
	if opts.Token != "" {
		h.token = sha256.Sum256([]byte(opts.Token))
	}
	h.mux.HandleFunc("GET /v1/node", h.info)
	if opts.Mover != nil && opts.Owners != nil {
		h.mux.HandleFunc("POST /v1/node/adopt", h.adopt)
		h.mux.HandleFunc("POST /v1/node/drain", h.drain)
		h.mux.HandleFunc("GET /v1/node/owner", h.owner)
	}
	h.mux.HandleFunc("GET /v1/node/audit/proof", h.proof)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		Fail(w, r, sandbox.Errorf(sandbox.KindNotFound, "no route %s %s on this node", r.Method, r.URL.Path).
			WithHint("a node serves GET /v1/node and GET /v1/node/audit/proof?seq=N"))
	})
	return h
}

// Handle adds a route (a net/http pattern such as "POST /v1/node/adopt") behind the same check.
func (h *Handler) Handle(pattern string, f http.HandlerFunc) { h.mux.HandleFunc(pattern, f) }

// ServeHTTP checks the caller, then serves the route.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.isCluster(r) {
		id, err := h.bearer.Identify(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentbox"`)
			Fail(w, r, err)
			return
		}
		if err := id.Allows("a node's own endpoints", auth.ScopeAdmin); err != nil {
			Fail(w, r, err)
			return
		}
	}
	h.mux.ServeHTTP(w, r)
}

// isCluster says whether r carries the cluster token (compared in constant time, by hash).
func (h *Handler) isCluster(r *http.Request) bool {
	if h.opts.Token == "" {
		return false
	}
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(got[:], h.token[:]) == 1
}

// Info is the node's NodeInfo now.
func (h *Handler) Info() cluster.NodeInfo {
	var tiers []sandbox.TierLoad
	var sessions, maxSessions int
	if h.opts.Engine != nil {
		tiers, sessions, maxSessions = h.opts.Engine.Load()
	}
	info := cluster.NodeInfo{ID: h.opts.ID, Addr: h.opts.Addr, Version: h.opts.Version, Role: "node",
		Started: h.opts.Started, Tiers: map[string]cluster.TierInfo{}, Sessions: sessions, AuditKey: h.opts.AuditKey}
	for _, t := range tiers {
		info.Tiers[string(t.Tier)] = cluster.TierInfo{WarmFree: t.WarmFree, WarmSessions: t.WarmSessions, Sessions: t.Sessions, MaxSessions: maxSessions}
	}
	if h.opts.Draining != nil {
		info.Draining = h.opts.Draining()
	}
	info.MemAvailableBytes, info.Load1 = machineLoad()
	return info
}

// GET /v1/node
func (h *Handler) info(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, h.Info())
}

// GET /v1/node/audit/proof?seq=N: the inclusion proof of record N of the node's audit log. The
// gateway checks it with the node's audit_key and decides who may see the record.
func (h *Handler) proof(w http.ResponseWriter, r *http.Request) {
	if h.opts.Prove == nil {
		Fail(w, r, sandbox.Errorf(sandbox.KindNotFound, "node %s keeps no audit log", h.opts.ID).WithHint("enable audit.enabled on the node"))
		return
	}
	seq, err := strconv.ParseInt(r.URL.Query().Get("seq"), 10, 64)
	if err != nil || seq < 0 {
		Fail(w, r, sandbox.Errorf(sandbox.KindInvalidRequest, "seq %q is not a record number", r.URL.Query().Get("seq")).
			WithHint("give seq=N, a record's seq from GET /v1/audit"))
		return
	}
	p, err := h.opts.Prove(r.Context(), seq)
	if err != nil {
		Fail(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, p)
}

// WriteJSON writes v as the answer.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Fail answers with the API's typed error body.
func Fail(w http.ResponseWriter, _ *http.Request, err error) {
	status, body := apiwire.ErrorResponse(err)
	WriteJSON(w, status, body)
}
