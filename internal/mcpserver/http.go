package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Engine is what the MCP front door needs of the core: the engine as one caller sees it.
// *sandbox.Manager and *sandbox.Audited are ones; the daemon, which builds both, says so.
type Engine interface {
	As(sandbox.Caller) *sandbox.View
}

// HTTPOptions configure the streamable HTTP front door. Zero values take the documented
// defaults.
type HTTPOptions struct {
	Options
	// Engine runs the code. Required, unless Backend is set.
	Engine Engine
	// Backend, when set, answers each call instead of Engine: the Backend for the caller id (its
	// scopes already checked), e.g. a cluster's gateway, whose tools go through its own API so
	// that lists cover every node.
	Backend func(ctx context.Context, id auth.Identity) (Backend, error)
	// Keys authenticate requests: the daemon's bootstrap key and the tenant keys, the same ones
	// the HTTP API takes (auth.NewKeys). Required.
	Keys *auth.Keys
	// MaxBodyBytes bounds a request body (a file written with file_write travels in one); larger
	// bodies get 413. Default 64 MiB, as the HTTP API's.
	MaxBodyBytes int64
}

// NewHandler returns the MCP front door: streamable HTTP, stateless (each POST is a whole
// exchange; no Mcp-Session-Id, so any daemon behind a balancer can answer it), behind the bearer
// keys. A request needs a valid key; each tool call then needs its route's scope and runs as the
// key's caller sees the engine, so a tenant's key reaches its own sessions only. A missing or
// wrong key is 401 with the API's error body; a missing scope is a tool error naming it.
//
// The SDK guards against DNS rebinding: a request that reached a loopback address with a Host
// header that is not a loopback name is refused with 403.
func NewHandler(opts HTTPOptions) (http.Handler, error) {
	if opts.Engine == nil && opts.Backend == nil {
		return nil, errors.New("mcpserver: an Engine or a Backend is required")
	}
	if opts.Keys == nil {
		return nil, errors.New("mcpserver: Keys are required")
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 64 << 20
	}
	e := opts.Engine
	srv, err := newServer(opts.Options, func(ctx context.Context, tool string, scopes []auth.Scope) (Backend, error) {
		id, ok := auth.IdentityOf(ctx)
		if !ok {
			// Every request passed the bearer check, which put its identity in the context.
			return nil, sandbox.Errorf(sandbox.KindUnauthorized, "the call carries no identity")
		}
		if err := id.Allows("the tool "+tool, scopes...); err != nil {
			return nil, err
		}
		if opts.Backend != nil {
			return opts.Backend(ctx, id)
		}
		return Local(e.As(id.Caller)), nil
	})
	if err != nil {
		return nil, err
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		MaxRequestBodyBytes: opts.MaxBodyBytes,
		// A client that goes away stops its run, as over the HTTP API.
		PropagateRequestCancellation: true,
	})
	return auth.NewBearerFor(opts.Keys).Require(h, fail), nil
}

// fail answers a request the bearer check refused with the API's error body.
func fail(w http.ResponseWriter, _ *http.Request, err error) {
	status, body := apiwire.ErrorResponse(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
