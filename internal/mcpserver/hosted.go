package mcpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Hosted is what the front door needs of the hosted MCP servers (internal/mcphost's Manager,
// which the daemon passes in): their names, each one's tools, and a governed call. The front
// door lists every hosted server's tools beside its own, named NAME__tool, and forwards their
// calls; the governance (pinning, allow and deny lists, DLP, scanning, audit) is the Hosted's.
type Hosted interface {
	// Names lists the registered servers.
	Names() []string
	// Tools returns a server's tools (starting it if it is not running), or why they may not be
	// listed (a changed definition not yet approved).
	Tools(ctx context.Context, name string) ([]*mcp.Tool, error)
	// Call calls a tool of a server, governed. A refusal is an error result; err is a failure
	// of the gateway or of the server's sandbox.
	Call(ctx context.Context, name, tool string, args json.RawMessage) (*mcp.CallToolResult, error)
	// CallContext returns ctx with what a tools/call request names besides its tool and
	// arguments (its _meta, its HTTP headers: an intent, a session), for Call to read.
	CallContext(ctx context.Context, req *mcp.CallToolRequest) context.Context
}

// HostedSep separates a hosted server's name from its tool's on /mcp ("memory__read_graph"):
// characters the spec allows in tool names, and never in a server's name nor in one of
// agentbox's own tools, so the first one splits a name unambiguously.
const HostedSep = "__"

// hostedScopes are the scopes a call of a hosted tool needs: those of /mcp/servers/NAME.
var hostedScopes = scopeRun

// hostedMiddleware adds the hosted servers' tools to tools/list and sends calls of NAME__tool
// to h. A server that cannot be listed (it does not start, or its definitions are refused) is
// left out of the list, and logged; calling one of its tools says why.
func (s *server) hostedMiddleware(h Hosted) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "tools/list":
				res, err := next(ctx, method, req)
				lr, ok := res.(*mcp.ListToolsResult)
				if err != nil || !ok || lr.NextCursor != "" {
					return res, err
				}
				if _, err := s.access(ctx, "tools/list", hostedScopes); err != nil {
					return res, nil // a key that may not call them does not see them
				}
				for _, name := range h.Names() {
					tools, err := h.Tools(ctx, name)
					if err != nil {
						s.log.LogAttrs(ctx, slog.LevelWarn, "mcp: hosted server's tools left out of tools/list", slog.String("server", name), slog.Any("err", err))
						continue
					}
					for _, t := range tools {
						c := *t
						c.Name = name + HostedSep + t.Name
						lr.Tools = append(lr.Tools, &c)
					}
				}
				return lr, nil
			case "tools/call":
				cr, ok := req.(*mcp.CallToolRequest)
				if !ok || cr.Params == nil {
					break
				}
				name, tool, ok := strings.Cut(cr.Params.Name, HostedSep)
				if !ok {
					break
				}
				if _, err := s.access(ctx, cr.Params.Name, hostedScopes); err != nil {
					res, _ := s.failure(ctx, cr.Params.Name, err)
					return res, nil
				}
				start := time.Now()
				res, err := h.Call(h.CallContext(ctx, cr), name, tool, cr.Params.Arguments)
				code := ""
				if err != nil {
					res, code = s.failure(ctx, cr.Params.Name, err)
				}
				s.logCall(ctx, cr.Params.Name, code, time.Since(start))
				return res, nil
			}
			return next(ctx, method, req)
		}
	}
}
