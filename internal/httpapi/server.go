package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Options configure the API. Zero values take the documented defaults.
type Options struct {
	// Engine runs the code: the daemon passes its *sandbox.Manager. Required. The API never
	// closes it: the daemon does, after the listener has shut down.
	Engine Engine
	// APIKey is the daemon's bootstrap key: an admin of its own tenant, on every route but GET
	// /v1/health. Required: there is no way to run the API without authentication.
	APIKey string
	// Keys, when set, authenticates the bootstrap key and the tenant keys of the key file (and
	// APIKey is not used); each route then needs its scope, and serves the key's tenant only.
	Keys *auth.Keys
	// MaxBodyBytes bounds a request body; larger bodies get 413. Default 64 MiB.
	MaxBodyBytes int64
	// Version is reported by GET /v1/health. Default "dev".
	Version string
	// Logger receives one line per request and every internal error. Default slog.Default().
	Logger *slog.Logger
	// Registry is where the API's metrics (and any runtime that is a prometheus.Collector)
	// are registered and what GET /metrics serves. Default: a new registry with the Go and
	// process collectors. The daemon passes the one its front doors share.
	Registry *prometheus.Registry
	// HealthTimeout bounds each runtime's health report. Default 2s.
	HealthTimeout time.Duration
	// MCP, when set, is the registry of hosted MCP servers /v1/mcp/servers manages; without it
	// the list is empty and changes are refused (conflict).
	MCP MCPRegistry
}

// API is the HTTP API, an http.Handler. The daemon mounts it on its listener
// (internal/daemon/http.go) beside the other front doors, and shuts the listener down.
type API struct {
	m        Engine
	auth     *auth.Bearer
	maxBody  int64
	version  string
	log      *slog.Logger
	reg      *prometheus.Registry
	metrics  *metrics
	healthTO time.Duration
	routes   []route
	mcp      MCPRegistry
	// tiers are the engine's tiers, the runtime labels a run may have in the metrics. Asked once:
	// an engine's tiers are fixed when it is built.
	tiers map[string]bool
	// promHandler serves GET /metrics from reg.
	promHandler http.Handler
	handler     http.Handler
}

// Interface guards.
var _ http.Handler = (*API)(nil)

// New checks opts and builds the API's routes and metrics.
func New(opts Options) (*API, error) {
	if opts.Engine == nil {
		return nil, errors.New("httpapi: an Engine is required")
	}
	var bearer *auth.Bearer
	if opts.Keys != nil {
		bearer = auth.NewBearerFor(opts.Keys)
	} else {
		var err error
		if bearer, err = auth.NewBearer(opts.APIKey); err != nil {
			return nil, fmt.Errorf("httpapi: %w", err)
		}
	}
	s := &API{
		m:        opts.Engine,
		auth:     bearer,
		maxBody:  opts.MaxBodyBytes,
		version:  opts.Version,
		log:      opts.Logger,
		reg:      opts.Registry,
		healthTO: opts.HealthTimeout,
		mcp:      opts.MCP,
	}
	if s.maxBody <= 0 {
		s.maxBody = 64 << 20
	}
	if s.version == "" {
		s.version = "dev"
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.healthTO <= 0 {
		s.healthTO = 2 * time.Second
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
		s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	var err error
	if s.metrics, err = newMetrics(s.reg, s.m); err != nil {
		return nil, fmt.Errorf("httpapi: metrics: %w", err)
	}
	// Runtimes that expose metrics do so by being a prometheus.Collector; the core stays free of
	// the Prometheus dependency.
	for _, t := range s.m.Tiers() {
		rt, _ := s.m.Runtime(t)
		if c, ok := rt.(prometheus.Collector); ok {
			if err := s.reg.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
				return nil, fmt.Errorf("httpapi: metrics of runtime %s: %w", t, err)
			}
		}
	}
	// The egress gateway likewise, when the engine has one that exposes metrics.
	if e, ok := s.m.(interface{ Egress() sandbox.Intents }); ok {
		if c, ok := e.Egress().(prometheus.Collector); ok && c != nil {
			if err := s.reg.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
				return nil, fmt.Errorf("httpapi: metrics of the egress gateway: %w", err)
			}
		}
	}
	s.tiers = map[string]bool{}
	for _, t := range s.m.Tiers() {
		s.tiers[string(t)] = true
	}
	s.promHandler = promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{ErrorLog: promLogger{s}})
	s.routes = s.routeTable()
	s.handler = s.withRequest(s.mux())
	return s, nil
}

// ServeHTTP serves the API.
func (s *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }
