package mcphost

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Handler serves the hosted servers at PREFIX/NAME (the daemon mounts it at /mcp/servers/): each
// one as an MCP server of its own over streamable HTTP with sessions (sessions.go), whose tools
// are the hosted server's tools under their own names, every call governed by Call, and whose
// resources, prompts, completions and resource subscriptions are the server's, forwarded and
// governed too (forward.go). Authentication is the mounting side's; a session belongs to the key
// that opened it (Options.Owner).
func (m *Manager) Handler(prefix string) http.Handler {
	nameOf := func(r *http.Request) string {
		name, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, prefix), "/")
		return name
	}
	sdk := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if g, ok := r.Context().Value(newSessionKey{}).(*gwSession); ok {
			return g.srv
		}
		if g := m.gw.get(r.Header.Get(sessionHeader)); g != nil {
			return g.srv
		}
		if _, ok := m.Get(nameOf(r)); !ok {
			return nil // 400 from the SDK
		}
		return m.bare // only asked for its protocol versions
	}, &mcp.StreamableHTTPOptions{SessionTimeout: m.opts.SessionIdle, PropagateRequestCancellation: true})
	// A request that is neither in a session nor an initialize (a client that makes every POST a
	// whole exchange, or asks which protocol the server speaks) is answered as before sessions
	// were kept: statelessly, by a server of its own that opens no session.
	stateless := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if g, ok := r.Context().Value(newSessionKey{}).(*gwSession); ok {
			return g.srv
		}
		return nil
	}, &mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rebinding(r) {
			sdk.ServeHTTP(w, r) // the SDK's guard answers
			return
		}
		name, owner := nameOf(r), m.owner(r.Context())
		if id := r.Header.Get(sessionHeader); id != "" {
			// Another key's session, or another server's, is not found: tenants never share one.
			if g := m.gw.get(id); g == nil || g.owner != owner || g.server != name {
				writeError(w, sandbox.Errorf(sandbox.KindNotFound, "MCP session %q not found on /mcp/servers/%s", id, name).
					WithHint("a session is used with the API key that opened it; initialize a new one (POST without Mcp-Session-Id)"))
				return
			}
			sdk.ServeHTTP(w, r)
			if r.Method == http.MethodDelete {
				m.forget(r.Context(), id) // its place and its subscriptions, now
			}
			return
		}
		if _, ok := m.Get(name); !ok || r.Method != http.MethodPost {
			sdk.ServeHTTP(w, r) // the SDK's answer (400, 405)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, mcp.DefaultMaxRequestBodyBytes+1))
		if err != nil {
			writeError(w, sandbox.Errorf(sandbox.KindInvalidRequest, "reading the request: %v", err))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body)) // the SDK bounds it again
		switch methodOf(body) {
		case "initialize":
		case "server/discover":
			// Answered as a stateful server answers it (the client then initializes a session);
			// the SDK opens no session for it.
			g := &gwSession{id: rand.Text(), server: name, owner: owner} // in no table
			g.srv = m.serverFor(r.Context(), name, g)
			sdk.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), newSessionKey{}, g)))
			return
		default:
			g := &gwSession{server: name, owner: owner, srv: m.statelessServer(r.Context(), name)}
			stateless.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), newSessionKey{}, g)))
			return
		}
		g, err := m.admit(r.Context(), name, owner)
		if err != nil {
			writeError(w, err)
			return
		}
		defer m.settle(g)
		g.srv = m.serverFor(r.Context(), name, g)
		sdk.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), newSessionKey{}, g)))
	})
}

// newSessionKey carries the session a request opens to the SDK's getServer.
type newSessionKey struct{}

// serverFor builds the MCP server of session g of /mcp/servers/NAME. A server that cannot be
// started or reached, or whose definitions are refused, lists no tools, and tools/call (and
// every forwarded request) returns why.
func (m *Manager) serverFor(ctx context.Context, name string, g *gwSession) *mcp.Server {
	h, s, err := m.hostOf(ctx, name)
	if err != nil {
		return m.buildServer(name, nil, nil, g)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return m.buildServer(name, m.listed(ctx, s, h), h.session, g)
}

// statelessServer is the MCP server of a request in no session. It is built once per client
// session, pin and listing policy, and kept: adding the tools (the SDK resolves each schema) was
// most of the gateway's cost per stateless call.
func (m *Manager) statelessServer(ctx context.Context, name string) *mcp.Server {
	none := &gwSession{server: name} // in no table: it subscribes to nothing
	h, s, err := m.hostOf(ctx, name)
	if err != nil {
		return m.buildServer(name, nil, nil, none)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	tools := m.listed(ctx, s, h)
	key := serverKey{session: h.session, pin: h.pin.Hash, listed: listedKey(tools)}
	if h.built != nil && h.builtKey == key {
		return h.built
	}
	h.built, h.builtKey = m.buildServer(name, tools, h.session, none), key
	return h.built
}

// serverKey is what the stateless MCP server of /mcp/servers/NAME is built from.
type serverKey struct {
	session *mcp.ClientSession
	pin     string
	listed  string
}

// listedKey tells listings apart: the tools' names, each with its _meta (where a flag is).
func listedKey(tools []*mcp.Tool) string {
	var b strings.Builder
	for _, t := range tools {
		b.WriteString(t.Name)
		if len(t.Meta) > 0 {
			m, _ := json.Marshal(t.Meta)
			b.Write(m)
		}
		b.WriteByte(0)
	}
	return b.String()
}

// buildServer is the MCP server of session g listing tools, whose capabilities are those of cs.
func (m *Manager) buildServer(name string, tools []*mcp.Tool, cs *mcp.ClientSession, g *gwSession) *mcp.Server {
	caps := capabilitiesOf(cs)
	opts := &mcp.ServerOptions{Capabilities: caps, GetSessionID: func() string { return g.id }}
	if g.id == "" && caps.Resources != nil {
		caps.Resources.Subscribe = false // a stateless exchange has no stream to send updates on
	}
	if caps.Resources != nil && caps.Resources.Subscribe {
		opts.SubscribeHandler = func(ctx context.Context, req *mcp.SubscribeRequest) error {
			return m.subscribe(ctx, name, g, req.Params.URI)
		}
		opts.UnsubscribeHandler = func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
			return m.unsubscribe(ctx, name, g, req.Params.URI)
		}
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "agentbox/" + name, Version: "1"}, opts)
	for _, t := range tools {
		srv.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return m.callResult(m.CallContext(ctx, req), name, req.Params.Name, req.Params.Arguments), nil
		})
	}
	// A call of a tool the server does not list goes to Call too, which refuses it as a tool
	// error ("has no tool"), as the reference servers answer it, rather than the SDK's protocol
	// error; and it is an audit record like every other call. tools/list is answered afresh each
	// time (a session outlives a change of pin or of the caller's listing policy).
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if cr, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && cr.Params != nil &&
				!slices.ContainsFunc(tools, func(t *mcp.Tool) bool { return t.Name == cr.Params.Name }) {
				return m.callResult(m.CallContext(ctx, cr), name, cr.Params.Name, cr.Params.Arguments), nil
			}
			if method == "tools/list" && tools != nil {
				if h, s, err := m.hostOf(ctx, name); err == nil {
					h.mu.Lock()
					fresh := m.listed(ctx, s, h)
					h.mu.Unlock()
					return &mcp.ListToolsResult{Tools: fresh}, nil
				}
			}
			if res, ok, err := m.forward(ctx, name, method, req); ok {
				if err != nil {
					return nil, protocolError(err)
				}
				return res, nil
			}
			return next(ctx, method, req)
		}
	})
	return srv
}

// CallContext is WithCall with a tools/call request's _meta and its HTTP request's headers:
// what Call reads of the call besides its tool and arguments (mcpserver.Hosted).
func (m *Manager) CallContext(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	var header http.Header
	if req.Extra != nil {
		header = req.Extra.Header
	}
	var meta mcp.Meta
	if req.Params != nil {
		meta = req.Params.Meta
	}
	return WithCall(ctx, meta, header)
}

// callResult is Call's result, or its error as a tool error.
func (m *Manager) callResult(ctx context.Context, name, tool string, args json.RawMessage) *mcp.CallToolResult {
	res, err := m.Call(ctx, name, tool, args)
	if err != nil {
		return ErrorResult(err)
	}
	return res
}

// ErrorResult is a tool error carrying the API's error body (code, message, hint).
func ErrorResult(err error) *mcp.CallToolResult {
	_, body := apiwire.ErrorResponse(err)
	b, _ := json.Marshal(body)
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
}
