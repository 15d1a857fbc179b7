package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Options configure a gateway. Zero values take the documented defaults.
type Options struct {
	// Discovery finds the nodes. Required.
	Discovery cluster.Discovery
	// Keys checks clients' API keys: the same key store (bootstrap key and keys file) every node
	// is given. Required.
	Keys *auth.Keys
	// Token is the cluster token sent to nodes' own endpoints (/v1/node/*). Without it those
	// need an admin key the gateway does not have: capacity is then unknown and placement falls
	// back to the least loaded by the gateway's own counts.
	Token string
	// Transport carries requests to nodes. Default: a keep-alive transport tuned for many
	// concurrent requests to few hosts.
	Transport http.RoundTripper
	// PollInterval is how often each node's capacity is read. Default 500ms (at most a second
	// stale, as placement needs).
	PollInterval time.Duration
	// Version is reported by GET /v1/health. Default "dev".
	Version string
	// MCPLists, when set, answers the /mcp tool calls that list or query across sessions
	// (mcpListTools: session_list, audit_query) instead of one node: the daemon's wiring gives
	// it the MCP front door over this gateway's own API, whose lists cover every node. Every
	// other /mcp call is forwarded as before.
	MCPLists http.Handler
	// E2B forwards E2B's SDKs to the nodes' E2B front doors (e2b.go); zero: none.
	E2B E2BOptions
	// Registry receives the gateway's own metrics; GET /metrics serves them beside the nodes'.
	// Default: a new registry.
	Registry *prometheus.Registry
	Logger   *slog.Logger
}

// Gateway is the gateway role's http.Handler.
type Gateway struct {
	opts    Options
	bearer  *auth.Bearer
	tr      http.RoundTripper
	log     *slog.Logger
	reg     *prometheus.Registry
	metrics *metrics
	// e2bDomain and e2bTokens: the E2B names this gateway forwards, and their tokens' check.
	e2bDomain string
	e2bTokens auth.SandboxTokens

	mu    sync.RWMutex
	nodes map[string]*node // by id, as the last poll found them
	order []*node          // the same, in discovery's order
	rr    atomic.Uint64    // rotates ties in placement
	// polls counts the polls of every node's capacity that have ended, so a test can wait for
	// one that began after a change of a node's instead of guessing the time it takes.
	polls atomic.Uint64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Interface guards.
var _ http.Handler = (*Gateway)(nil)

// New starts a gateway: it reads every node's capacity once before it returns, then keeps
// polling until Close.
func New(opts Options) (*Gateway, error) {
	if opts.Discovery == nil || opts.Keys == nil {
		return nil, sandbox.Errorf(sandbox.KindInternal, "gateway: Discovery and Keys are required")
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 500 * time.Millisecond
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	g := &Gateway{opts: opts, bearer: auth.NewBearerFor(opts.Keys), tr: opts.Transport, log: opts.Logger,
		reg: opts.Registry, nodes: map[string]*node{},
		e2bDomain: strings.TrimSuffix(strings.ToLower(opts.E2B.Domain), "."), e2bTokens: auth.SandboxTokens{Secret: opts.E2B.TokenSecret}}
	if g.tr == nil {
		g.tr = &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        512,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
			// Nodes answer runs after the run: no response header timeout here; the client's
			// context (and the node's own limits) bound it.
			ExpectContinueTimeout: time.Second,
		}
	}
	g.metrics = newMetrics(g.reg)
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.poll(g.ctx)
	g.wg.Add(1)
	go g.pollLoop()
	return g, nil
}

// Close stops polling. It does not wait for requests in flight: the listener's shutdown does.
func (g *Gateway) Close() error {
	g.cancel()
	g.wg.Wait()
	return nil
}

// ServeHTTP authenticates the request and sends it where it goes.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &apiwire.StatusWriter{ResponseWriter: w}
	defer func() { g.metrics.observe(r, sw.Status, time.Since(start)) }()
	p := r.URL.Path
	if p == "/v1/health" && r.Method == http.MethodGet {
		g.health(sw, r)
		return
	}
	if a, ok := g.e2bAddress(r); ok {
		// E2B's SDKs authenticate their own way (an API key, or a sandbox's access token).
		g.e2b(sw, r, a)
		return
	}
	if p == "/ui" || strings.HasPrefix(p, "/ui/") {
		// The console authenticates itself (a login with a key, then its own cookie).
		g.console(sw, r)
		return
	}
	id, err := g.bearer.Identify(r)
	if err != nil {
		sw.Header().Set("WWW-Authenticate", `Bearer realm="agentbox"`)
		fail(sw, err)
		return
	}
	r = r.WithContext(withIdentity(r.Context(), id))
	g.route(sw, r)
}

// route dispatches by path; the table of where each goes is in doc.go.
func (g *Gateway) route(w http.ResponseWriter, r *http.Request) {
	p, m := r.URL.Path, r.Method
	switch {
	case (p == "/v1/run" || p == "/v1/route") && m == http.MethodPost:
		g.placed(w, r)
	case p == "/v1/sessions" && m == http.MethodPost:
		g.placed(w, r)
	case p == "/v1/sessions" && m == http.MethodGet:
		g.listSessions(w, r)
	case strings.HasPrefix(p, "/v1/sessions/"):
		sid, _, _ := strings.Cut(strings.TrimPrefix(p, "/v1/sessions/"), "/")
		g.session(w, r, sid)
	case strings.HasPrefix(p, "/v1/artifacts/") && m == http.MethodGet:
		g.firstFound(w, r)
	case p == "/v1/audit" && m == http.MethodGet:
		g.audit(w, r)
	case p == "/v1/audit/proof" && m == http.MethodGet:
		g.auditProof(w, r)
	case p == "/metrics" && m == http.MethodGet:
		g.metricsAll(w, r)
	case p == "/v1/egress/reload" && m == http.MethodPost,
		strings.HasPrefix(p, "/v1/mcp/servers") && m != http.MethodGet:
		g.everyNode(w, r)
	case p == "/v1/images", strings.HasPrefix(p, "/v1/keys"), strings.HasPrefix(p, "/v1/mcp/servers"):
		g.anyNode(w, r)
	case p == "/mcp":
		g.mcp(w, r)
	case strings.HasPrefix(p, "/mcp/servers/"):
		g.hostedMCP(w, r)
	case strings.HasPrefix(p, "/v1/volumes"):
		// A node's volumes are the cluster's (their records in the shared store): any node
		// answers for every volume.
		g.anyNode(w, r)
	case p == "/v1/node" || strings.HasPrefix(p, "/v1/node/"):
		fail(w, sandbox.Errorf(sandbox.KindNotFound, "%s is a node's own endpoint, not the gateway's", p).
			WithHint("ask the node itself (its address is in discovery)"))
	default:
		// Anything else a node serves (and its typed 404 for what it does not).
		g.anyNode(w, r)
	}
}

// health answers GET /v1/health: the gateway is up when some node is; each tier is listed with
// on how many nodes it runs.
func (g *Gateway) health(w http.ResponseWriter, _ *http.Request) {
	type rt struct {
		Name  string `json:"name"`
		OK    bool   `json:"ok"`
		State string `json:"state"`
	}
	nodes := g.snapshot()
	healthy, tiers, names := 0, map[string]int{}, []string{}
	for _, n := range nodes {
		if !n.healthy() {
			continue
		}
		healthy++
		for t := range n.info().Tiers {
			if tiers[t] == 0 {
				names = append(names, t)
			}
			tiers[t]++
		}
	}
	out := struct {
		Status   string `json:"status"`
		Version  string `json:"version"`
		Role     string `json:"role"`
		Nodes    int    `json:"nodes"`
		Healthy  int    `json:"healthy_nodes"`
		Runtimes []rt   `json:"runtimes"`
	}{Status: "ok", Version: g.opts.Version, Role: "gateway", Nodes: len(nodes), Healthy: healthy, Runtimes: []rt{}}
	for _, t := range sortedStrings(names) {
		out.Runtimes = append(out.Runtimes, rt{Name: t, OK: true, State: plural(tiers[t], "node")})
	}
	status := http.StatusOK
	switch {
	case healthy == 0:
		out.Status, status = "unavailable", http.StatusServiceUnavailable
	case healthy < len(nodes):
		out.Status = "degraded"
	}
	writeJSON(w, status, out)
}

// writeJSON writes v as the answer.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// fail answers with the API's typed error body (E2B's, to an E2B request).
func fail(w http.ResponseWriter, err error) {
	if _, ok := w.(*e2bWriter); ok {
		e2bError(w, err)
		return
	}
	status, body := apiwire.ErrorResponse(err)
	writeJSON(w, status, body)
}

type identityKey struct{}

func withIdentity(ctx context.Context, id auth.Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

func identityOf(ctx context.Context) auth.Identity {
	id, _ := ctx.Value(identityKey{}).(auth.Identity)
	return id
}

// identityKnown says whether the gateway knows who makes the request (every request but an E2B
// signed file URL, which only its node can check).
func identityKnown(ctx context.Context) bool {
	_, ok := ctx.Value(identityKey{}).(auth.Identity)
	return ok
}
