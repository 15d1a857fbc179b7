package mcpserver

import (
	"context"
	"log/slog"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/internal/auth"
)

// Options configure the MCP server. Zero values take the documented defaults.
type Options struct {
	// Version is reported in the server's implementation info. Default "dev".
	Version string
	// Logger receives one line per tool call and every internal error. Default slog.Default().
	Logger *slog.Logger
	// ShowInternalErrors gives clients the text of internal errors. Default false: the daemon's
	// front door answers with a call id and logs the text, as the HTTP API does; the stdio
	// server over a local engine shows it, since its user is the operator.
	ShowInternalErrors bool
	// Hosted, when set, adds the hosted MCP servers' tools (NAME__tool), each call governed by
	// it and needing the run scope, as /mcp/servers/NAME does.
	Hosted Hosted
}

// instructions tell a model what the server is for.
const instructions = `agentbox runs untrusted Python code in sandboxes.
run_code runs code once in a fresh sandbox. For work in turns, session_create starts an interpreter that keeps variables, imports and files across session_run calls; close it with session_close.
runtime "auto" (the default) lets agentbox pick the tier by the code's imports: nano starts in milliseconds with the standard library only; heavy is a gVisor sandbox with numpy, pandas and matplotlib (image_list shows the images and their packages). The result's routing reasons say why.
Figures drawn with matplotlib come back as images; a DataFrame left as the last expression comes back as text and HTML.
A failure is a tool error whose text is {"error": {"code", "message", "hint"}}: the hint says what to do.`

// newServer builds the MCP server: every tool, each call going to the Backend access gives it.
func newServer(opts Options, acc access) (*mcp.Server, error) {
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c, err := theContract()
	if err != nil {
		return nil, err
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "agentbox", Title: "agentbox", Version: opts.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		// Tools only, and a fixed set of them: no list-change notifications to wait for, and no
		// logging capability (deprecated by 2026-07-28).
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	s := &server{c: c, access: acc, log: opts.Logger, showInternal: opts.ShowInternalErrors}
	srv.AddReceivingMiddleware(onlyDeclared)
	if opts.Hosted != nil {
		srv.AddReceivingMiddleware(s.hostedMiddleware(opts.Hosted))
	}
	if err := addTools(srv, s); err != nil {
		return nil, err
	}
	return srv, nil
}

// Serve serves the tools over one connection of t (for `agentbox mcp`, stdio) until the client
// disconnects or ctx is done. Every call goes to b, which answers as its own key or user may:
// the daemon checks a client's key, and a local engine's user is its operator.
func Serve(ctx context.Context, t mcp.Transport, b Backend, opts Options) error {
	srv, err := newServer(opts, func(context.Context, string, []auth.Scope) (Backend, error) { return b, nil })
	if err != nil {
		return err
	}
	return srv.Run(ctx, t)
}

// undeclared are the method families of capabilities the server does not declare. The SDK would
// answer some of them (an empty prompts/list); a client must instead learn that they are not
// there, as the spec asks of a server that does not declare the capability.
var undeclared = []string{"prompts/", "resources/", "completion/", "logging/"}

// onlyDeclared answers the methods of undeclared capabilities with "method not found".
func onlyDeclared(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		for _, p := range undeclared {
			if strings.HasPrefix(method, p) {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "agentbox serves tools only; " + method + " is not available"}
			}
		}
		return next(ctx, method, req)
	}
}
