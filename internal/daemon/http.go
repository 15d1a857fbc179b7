package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/e2b"
	"github.com/agentbox-dev/agentbox/internal/httpapi"
	"github.com/agentbox-dev/agentbox/internal/mcphost"
	"github.com/agentbox-dev/agentbox/internal/mcpserver"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/webui"
)

// The daemon's one listener and what is mounted on it. Each front door is an http.Handler built
// from a small interface of its own over the Manager; they share authentication
// (internal/auth), the wire layer (internal/apiwire) and the metrics registry, and none imports
// another. This file is the only place that knows them all.
//
//	/v1/      the HTTP API (internal/httpapi, api/openapi.yaml); GET /v1/health needs no key
//	/metrics  Prometheus, served by the HTTP API behind its key (it is in the contract)
//	/mcp      the MCP front door (internal/mcpserver): streamable HTTP, stateless, the same keys
//	/mcp/servers/NAME  a hosted MCP server (internal/mcphost), governed; the same keys, scope run
//	/ui/      the web console (internal/webui): server-rendered pages, embedded assets, a login
//	          with the same keys that sets a session cookie, CSRF tokens on every change
//	Host api.DOMAIN, PORT-ID.DOMAIN: the E2B front door (internal/e2b), whatever the path
//	/v1/node  a cluster node's own endpoints (internal/nodeapi), only with --role node: the
//	          cluster token or an admin key
//	anything else: the HTTP API's typed 404, as before there was more than one front door

// FrontDoorOptions configure the listener's front doors and its shutdown. Zero values take the
// documented defaults.
type FrontDoorOptions struct {
	// APIKey is the daemon's bootstrap key, an admin of its own tenant, which every front door
	// accepts (GET /v1/health needs none). Required.
	APIKey string
	// KeysFile holds the tenant keys (`agentbox keys`), read again whenever it changes; "" or a
	// missing file is a daemon without tenants, where the bootstrap key is the only key.
	KeysFile string
	// MaxBodyBytes bounds a request body; larger bodies get 413. Default 64 MiB.
	MaxBodyBytes int64
	// Version is reported by GET /v1/health. Default "dev".
	Version string
	// Logger receives one line per request, every internal error and the shutdown's progress.
	// Default slog.Default().
	Logger *slog.Logger
	// HostedMCP, when set, serves the hosted MCP servers at /mcp/servers/NAME (OpenHostedMCP).
	// The caller closes it after Serve has returned.
	HostedMCP *mcphost.Manager
	// E2B configures the E2B front door (e2b.go); off by default.
	E2B E2BOptions
	// Node, when set, serves a cluster node's own endpoints at /v1/node (internal/nodeapi).
	Node *NodeOptions
	// UISessionsFile keeps the web console's logins across a restart (webui.Options.SessionsFile);
	// "" keeps them in memory.
	UISessionsFile string
	// UISharedLogins, on a cluster's node, keeps the console's logins in this directory of the
	// shared storage (webui.Options.SharedLogins): a login is valid on every node.
	UISharedLogins string
	// ShutdownTimeout is how long Serve waits for running requests once its context is done
	// before it cancels them. Default 30s: most runs finish well within it, and a stuck one must
	// not hold a restart for its whole timeout (up to the policy's maximum of minutes).
	ShutdownTimeout time.Duration
}

// FrontDoors is what the daemon serves on its listener: every front door, mounted by path. It is
// an http.Handler; Serve runs it on a listener with graceful shutdown.
type FrontDoors struct {
	handler http.Handler
	e2b     *e2b.Handler
	// e2bOwn serves an E2B listener of its own when e2b does not (the gateway's).
	e2bOwn    http.Handler
	debugUIDs []uint32
	log       *slog.Logger
	shutTO    time.Duration
	inflight  atomic.Int64
	// idle collects the daemon's garbage while no request is in flight (idlegc.go); the first
	// serve under way runs it.
	idle    *idleCollector
	idleRun atomic.Bool
}

// Interface guards.
var (
	_ http.Handler     = (*FrontDoors)(nil)
	_ httpapi.Engine   = (*sandbox.Manager)(nil)
	_ httpapi.Engine   = (*sandbox.Audited)(nil)
	_ mcpserver.Engine = (*sandbox.Manager)(nil)
	_ mcpserver.Engine = (*sandbox.Audited)(nil)
	_ mcpserver.Hosted = (*mcphost.Manager)(nil)
	_ webui.Engine     = (*sandbox.Manager)(nil)
	_ webui.Engine     = (*sandbox.Audited)(nil)
)

// NewFrontDoors builds the front doors over m, the Manager (behind its audit decorator, as
// NewManager builds it). It does not close m: the caller does, after Serve has returned.
func NewFrontDoors(m httpapi.Engine, opts FrontDoorOptions) (*FrontDoors, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	// One registry for every front door's metrics and the runtimes'; GET /metrics serves it.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	keys, err := auth.NewKeys(opts.APIKey, opts.KeysFile)
	if err != nil {
		return nil, err
	}
	var registry httpapi.MCPRegistry
	if opts.HostedMCP != nil {
		registry = hostedRegistry{opts.HostedMCP} // /v1/mcp/servers
	}
	api, err := httpapi.New(httpapi.Options{
		MCP:          registry,
		Engine:       m,
		Keys:         keys,
		APIKey:       opts.APIKey,
		MaxBodyBytes: opts.MaxBodyBytes,
		Version:      opts.Version,
		Logger:       opts.Logger,
		Registry:     reg,
	})
	if err != nil {
		return nil, err // it names itself ("httpapi: ...")
	}
	// The MCP front door needs the engine as each caller sees it; an engine that cannot say
	// (a test's bare fake) has none, and /mcp is the HTTP API's 404.
	var mcp http.Handler = api
	if e, ok := m.(mcpserver.Engine); ok {
		mo := mcpserver.Options{Version: opts.Version, Logger: opts.Logger}
		if opts.HostedMCP != nil {
			mo.Hosted = opts.HostedMCP // its tools on /mcp as NAME__tool
		}
		mcp, err = mcpserver.NewHandler(mcpserver.HTTPOptions{Engine: e, Keys: keys, MaxBodyBytes: opts.MaxBodyBytes, Options: mo})
		if err != nil {
			return nil, err
		}
	}
	// The console likewise; without an engine that can answer as a caller, /ui/ is the API's 404.
	var ui http.Handler = api
	if e, ok := m.(webui.Engine); ok {
		ui, err = webui.New(webui.Options{Engine: e, Keys: keys, VerifyAudit: auditVerifier(m),
			SessionsFile: opts.UISessionsFile, SharedLogins: opts.UISharedLogins, Others: otherNodesSessions(m),
			Version: opts.Version, Logger: opts.Logger})
		if err != nil {
			return nil, err
		}
	}
	e2bDoor, err := newE2B(m, keys, opts.APIKey, opts)
	if err != nil {
		return nil, err
	}
	var more []mount
	if opts.HostedMCP != nil {
		hosted := auth.NewBearerFor(keys).Require(opts.HostedMCP.Handler("/mcp/servers/"), failJSON, auth.ScopeRun)
		more = append(more, mount{path: "/mcp/servers/", h: hosted})
	}
	if opts.Node != nil {
		node := newNodeAPI(m, keys, opts)
		more = append(more, mount{path: "/v1/node", h: node}, mount{path: "/v1/node/", h: node})
	}
	doors := newFrontDoors(byHost(e2bDoor, mountAll(api, mcp, ui, more...)), opts)
	doors.e2b, doors.debugUIDs = e2bDoor, opts.E2B.DebugUIDs
	return doors, nil
}

// byHost sends the E2B front door's names to it and everything else to next.
func byHost(door *e2b.Handler, next http.Handler) http.Handler {
	if door == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if door.Owns(r.Host) {
			door.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// failJSON answers a refused request with the API's error body.
func failJSON(w http.ResponseWriter, _ *http.Request, err error) {
	status, body := apiwire.ErrorResponse(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// mountAll mounts every front door at its paths (see the table at the top of this file); more
// are mounted before them (a longer path under one of theirs).
func mountAll(api, mcp, ui http.Handler, more ...mount) http.Handler {
	return route(append(more, []mount{
		{path: "/v1/", h: api},
		{path: "/metrics", h: api},
		{path: "/mcp", h: mcp},
		{path: "/ui/", h: ui}, {path: "/ui", h: ui},
	}...), api)
}

// newFrontDoors serves h, the front doors already mounted.
func newFrontDoors(h http.Handler, opts FrontDoorOptions) *FrontDoors {
	d := &FrontDoors{handler: h, log: opts.Logger, shutTO: opts.ShutdownTimeout}
	d.idle = newIdleCollector(d.inflight.Load)
	if d.log == nil {
		d.log = slog.Default()
	}
	if d.shutTO <= 0 {
		d.shutTO = 30 * time.Second
	}
	return d
}

// mount is one front door on the listener: a path that ends in "/" takes the whole subtree,
// another only itself.
type mount struct {
	path string
	h    http.Handler
}

// route sends each request to the front door mounted at its path, and the rest to fallback.
// It is not an http.ServeMux on purpose: a ServeMux would answer unclean paths ("//v1/run") and
// subtree roots without their slash ("/v1") with its own redirects before any front door saw
// them, without the request id, log line and metrics every answer has had. Each front door's
// own router does that cleaning, inside its middleware.
func route(mounts []mount, fallback http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		for _, m := range mounts {
			if p == m.path || strings.HasSuffix(m.path, "/") && strings.HasPrefix(p, m.path) {
				m.h.ServeHTTP(w, r)
				return
			}
		}
		fallback.ServeHTTP(w, r)
	})
}

// ServeHTTP serves every front door, counting the requests in flight for the shutdown.
func (d *FrontDoors) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.inflight.Add(1)
	defer d.inflight.Add(-1)
	d.handler.ServeHTTP(w, r)
}

// Serve answers requests on ln until ctx is done, then shuts down gracefully: it stops
// accepting, waits up to ShutdownTimeout for running requests, then cancels those still running
// (their runs stop) and waits a little more for their handlers to answer. It closes ln, not the
// Manager. It returns nil after a shutdown and the listener's error otherwise.
func (d *FrontDoors) Serve(ctx context.Context, ln net.Listener) error {
	return d.serve(ctx, ln, d, "", "")
}

// E2BEnabled says whether the E2B front door runs.
func (d *FrontDoors) E2BEnabled() bool { return d.e2b != nil }

// ServeE2B serves the E2B front door alone on ln, as Serve does the whole, with TLS when
// certFile and keyFile are set (HTTP/2 offered, as E2B's edge does). Every name on ln is the E2B
// front door's: the control plane, or a sandbox by its name or the SDK's E2b-Sandbox-Id header.
func (d *FrontDoors) ServeE2B(ctx context.Context, ln net.Listener, certFile, keyFile string) error {
	e := d.E2BHandler()
	if e == nil {
		return errors.New("the E2B front door is not enabled")
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.inflight.Add(1)
		defer d.inflight.Add(-1)
		e.ServeHTTP(w, r)
	})
	return d.serve(ctx, ln, h, certFile, keyFile)
}

// E2BHandler is what ServeE2B serves (an E2B listener of its own), or nil when E2B is off.
func (d *FrontDoors) E2BHandler() http.Handler {
	if d.e2b != nil {
		return d.e2b
	}
	return d.e2bOwn
}

// Close stops what the front doors run in the background (the E2B front door's timeout
// reaper). Call it after Serve has returned.
func (d *FrontDoors) Close() error {
	if d.e2b != nil {
		return d.e2b.Close()
	}
	return nil
}

func (d *FrontDoors) serve(ctx context.Context, ln net.Listener, handler http.Handler, certFile, keyFile string) error {
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	if d.idleRun.CompareAndSwap(false, true) {
		ictx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); d.idle.run(ictx) }()
		defer func() { stop(); <-done; d.idleRun.Store(false) }()
	}
	hs := &http.Server{
		Handler: handler,
		// Headers must come quickly; bodies and answers are not bounded here because a run may
		// legitimately take up to the policy's maximum timeout, which the Manager enforces.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() {
		if certFile != "" {
			errc <- hs.ServeTLS(ln, certFile, keyFile)
			return
		}
		errc <- hs.Serve(ln)
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	d.log.Info("shutting down: no new requests, waiting for running ones",
		"running", d.inflight.Load(), "bound", d.shutTO)
	sctx, cancel := context.WithTimeout(context.Background(), d.shutTO)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		d.log.Warn("requests still running at the shutdown bound; stopping them", "running", d.inflight.Load())
		cancelBase()
		_ = hs.Close()
		deadline := time.Now().Add(5 * time.Second)
		for d.inflight.Load() > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Listen opens the daemon's listener on addr, and warns when it reaches beyond this machine.
// Call it before the engine starts, so a busy port fails at once, not after the warm-up.
func Listen(addr string, log *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		log.Warn("listening beyond this machine: anyone who can reach the address and has the key can run code", "addr", ln.Addr().String())
	}
	return ln, nil
}
