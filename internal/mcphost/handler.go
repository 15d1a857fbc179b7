package mcphost

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/internal/apiwire"
)

// Handler serves the hosted servers at PREFIX/NAME (the daemon mounts it at /mcp/servers/): each
// one as an MCP server of its own over streamable HTTP, stateless, whose tools are the hosted
// server's tools under their own names, every call governed by Call, and whose resources, prompts
// and completions are the server's, forwarded and governed too (forward.go). Authentication is
// the mounting side's.
func (m *Manager) Handler(prefix string) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		name, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, prefix), "/")
		return m.serverFor(r.Context(), name)
	}, &mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
}

// serverFor builds the MCP server a request to /mcp/servers/NAME talks to. A server that cannot
// be started or reached, or whose definitions are refused, lists no tools, and tools/call (and
// every forwarded request) returns why.
func (m *Manager) serverFor(ctx context.Context, name string) *mcp.Server {
	if _, ok := m.Get(name); !ok {
		return nil // 400 from the SDK
	}
	// A server that cannot be started (or reached) still answers: no tools listed, and every
	// call and request says why, typed, through the middleware below.
	h, s, err := m.hostOf(ctx, name)
	if err != nil {
		return m.buildServer(name, nil, nil)
	}
	// The MCP server is built once per client session, pin and listing policy, and kept: adding
	// the tools (the SDK resolves each schema) was most of the gateway's cost per call.
	h.mu.Lock()
	defer h.mu.Unlock()
	tools := m.listed(ctx, s, h)
	key := serverKey{session: h.session, pin: h.pin.Hash, listed: listedKey(tools)}
	if h.built != nil && h.builtKey == key {
		return h.built
	}
	h.built, h.builtKey = m.buildServer(name, tools, h.session), key
	return h.built
}

// serverKey is what the MCP server of /mcp/servers/NAME is built from.
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

// buildServer is the MCP server of /mcp/servers/NAME listing tools, whose capabilities are
// those of cs.
func (m *Manager) buildServer(name string, tools []*mcp.Tool, cs *mcp.ClientSession) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "agentbox/" + name, Version: "1"}, &mcp.ServerOptions{Capabilities: capabilitiesOf(cs)})
	for _, t := range tools {
		srv.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return m.callResult(m.CallContext(ctx, req), name, req.Params.Name, req.Params.Arguments), nil
		})
	}
	// A call of a tool the server does not list goes to Call too, which refuses it as a tool
	// error ("has no tool"), as the reference servers answer it, rather than the SDK's protocol
	// error; and it is an audit record like every other call.
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if cr, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && cr.Params != nil &&
				!slices.ContainsFunc(tools, func(t *mcp.Tool) bool { return t.Name == cr.Params.Name }) {
				return m.callResult(m.CallContext(ctx, cr), name, cr.Params.Name, cr.Params.Arguments), nil
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
