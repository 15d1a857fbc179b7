package daemon

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/cluster/kube"
	"github.com/agentbox-dev/agentbox/internal/cluster/nomad"
	"github.com/agentbox-dev/agentbox/internal/config"
	clustergw "github.com/agentbox-dev/agentbox/internal/gateway"
	"github.com/agentbox-dev/agentbox/internal/mcpserver"
)

// The ways this build finds a cluster's nodes, by the kind a --discovery spec names. Adding one
// is a package with its cluster.Kind and one line here, as builtinTiers lists the tiers.
var discoveryKinds = []cluster.Kind{
	cluster.StaticKind,
	kube.Kind,
	nomad.Kind,
}

// OpenDiscovery builds the Discovery cfg's spec names (--discovery); its watches end with ctx.
func OpenDiscovery(ctx context.Context, cfg config.Config, log *slog.Logger) (cluster.Discovery, error) {
	return cluster.Open(ctx, cfg.Cluster.Discovery, discoveryKinds, log)
}

// NewGatewayDoors builds what `agentbox serve --role gateway` serves: the gateway (internal/
// gateway) over the nodes discovery finds, behind the same keys the nodes are given, on the
// same listener and shutdown as a node's front doors. The caller closes the returned closer
// after Serve has returned.
func NewGatewayDoors(ctx context.Context, cfg config.Config, opts FrontDoorOptions) (*FrontDoors, io.Closer, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	keys, err := auth.NewKeys(opts.APIKey, opts.KeysFile)
	if err != nil {
		return nil, nil, err
	}
	disc, err := OpenDiscovery(ctx, cfg, opts.Logger)
	if err != nil {
		return nil, nil, err
	}
	// The MCP tools that list across sessions (session_list, audit_query) are answered by the MCP
	// front door over the gateway's own API, whose lists cover every node; the rest of /mcp is
	// forwarded to nodes.
	self := &lateHandler{}
	lists, err := gatewayMCPLists(keys, self, opts)
	if err != nil {
		return nil, nil, err
	}
	gw, err := clustergw.New(clustergw.Options{Discovery: disc, Keys: keys, Token: cfg.Cluster.Token,
		Version: opts.Version, Logger: opts.Logger, MCPLists: lists,
		// E2B's SDKs through the gateway: the nodes' E2B domain, and their access tokens' secret.
		E2B: clustergw.E2BOptions{Domain: cfg.E2B.Domain, TokenSecret: auth.SandboxTokenSecret(opts.APIKey)}})
	if err != nil {
		return nil, nil, err
	}
	self.h = gw
	doors := newFrontDoors(gw, opts)
	// The gateway's own E2B listener (--e2b-listen), as a node's.
	doors.e2bOwn = gw.E2BHandler()
	return doors, gw, nil
}

// lateHandler serves with h, set once it exists.
type lateHandler struct{ h http.Handler }

func (l *lateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { l.h.ServeHTTP(w, r) }

type callerKeyCtx struct{}

// gatewayMCPLists is the MCP front door of a gateway: its tools call the gateway's own API (in
// this process, no network) with the caller's key, so the gateway authenticates, places, routes
// and merges for them as for any client.
func gatewayMCPLists(keys *auth.Keys, gw http.Handler, opts FrontDoorOptions) (http.Handler, error) {
	hc := &http.Client{Transport: handlerTransport{gw}}
	h, err := mcpserver.NewHandler(mcpserver.HTTPOptions{Keys: keys, MaxBodyBytes: opts.MaxBodyBytes,
		Options: mcpserver.Options{Version: opts.Version, Logger: opts.Logger},
		Backend: func(ctx context.Context, _ auth.Identity) (mcpserver.Backend, error) {
			key, _ := ctx.Value(callerKeyCtx{}).(string)
			// "localhost" is no E2B host name (it has no domain): the gateway serves it as its API.
			c, err := client.New("http://localhost", key, client.WithHTTPClient(hc))
			if err != nil {
				return nil, err
			}
			return daemonBackend{c}, nil
		}})
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, key, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKeyCtx{}, strings.TrimSpace(key))))
	}), nil
}

// handlerTransport carries a client's requests to a handler in this process, its answer
// buffered whole (the MCP tools' calls answer JSON, not streams).
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := &bufferedAnswer{header: http.Header{}}
	if req.Body == nil {
		req.Body = http.NoBody
	}
	t.h.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &http.Response{StatusCode: rec.status, Status: http.StatusText(rec.status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rec.header, Body: io.NopCloser(&rec.body), ContentLength: int64(rec.body.Len()), Request: req}, nil
}

// bufferedAnswer is an http.ResponseWriter that keeps the answer.
type bufferedAnswer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedAnswer) Header() http.Header { return b.header }
func (b *bufferedAnswer) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}
func (b *bufferedAnswer) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}
