package httpapi

import (
	"context"
	"net/http"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The registry of hosted MCP servers (/v1/mcp/servers, admin scope): the same registry as
// `agentbox mcp add|list|remove|approve` (internal/mcphost), reached through a small interface
// of this package's own that the daemon fills (internal/daemon/mcphost.go).

// MCPRegistry is what the routes need of the hosted MCP servers' registry. Its errors are core
// errors (*sandbox.Error: invalid_request, conflict, not_found, runtime_unavailable).
type MCPRegistry interface {
	ListMCPServers() []api.MCPServer
	// AddMCPServer registers s and returns it as registered.
	AddMCPServer(s api.MCPServer) (api.MCPServer, error)
	RemoveMCPServer(name string) error
	// ApproveMCPServer pins the server's current tool definitions (starting it if needed).
	ApproveMCPServer(ctx context.Context, name string) (api.MCPPin, error)
}

// noRegistry is the error of a daemon built without one.
func noRegistry() error {
	return sandbox.Errorf(sandbox.KindConflict, "this daemon hosts no MCP servers: it was built without their registry").
		WithHint("run the daemon with `agentbox serve`, which opens DATA_DIR/mcp")
}

// GET /v1/mcp/servers
func (s *API) handleListMCPServers(w http.ResponseWriter, r *http.Request) {
	out := api.MCPServerList{Servers: []api.MCPServer{}}
	if s.mcp != nil {
		out.Servers = append(out.Servers, s.mcp.ListMCPServers()...)
	}
	writeJSON(w, http.StatusOK, out)
}

// POST /v1/mcp/servers
func (s *API) handleAddMCPServer(w http.ResponseWriter, r *http.Request) {
	var in api.MCPServer
	if err := decode(w, r, s.maxBody, &in, false); err != nil {
		s.fail(w, r, err)
		return
	}
	if s.mcp == nil {
		s.fail(w, r, noRegistry())
		return
	}
	in.Added, in.Running = nil, false
	out, err := s.mcp.AddMCPServer(in)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

// DELETE /v1/mcp/servers/{name}
func (s *API) handleRemoveMCPServer(w http.ResponseWriter, r *http.Request) {
	if s.mcp == nil {
		s.fail(w, r, noRegistry())
		return
	}
	if err := s.mcp.RemoveMCPServer(r.PathValue("name")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// POST /v1/mcp/servers/{name}/approve
func (s *API) handleApproveMCPServer(w http.ResponseWriter, r *http.Request) {
	if s.mcp == nil {
		s.fail(w, r, noRegistry())
		return
	}
	pin, err := s.mcp.ApproveMCPServer(r.Context(), r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, pin)
}
