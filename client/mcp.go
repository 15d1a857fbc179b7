package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/agentbox-dev/agentbox/api"
)

// The hosted MCP servers' registry (/v1/mcp/servers). Each call needs a key with the admin
// scope; the daemon's own key has it. The servers' tools are reached over MCP itself, at
// /mcp/servers/NAME or on /mcp as NAME__tool.

// ListMCPServers lists the hosted MCP servers, by name (GET /v1/mcp/servers).
func (c *Client) ListMCPServers(ctx context.Context) ([]api.MCPServer, error) {
	var l api.MCPServerList
	if err := c.do(ctx, http.MethodGet, "/v1/mcp/servers", nil, &l, http.StatusOK); err != nil {
		return nil, err
	}
	return l.Servers, nil
}

// AddMCPServer registers a hosted MCP server (POST /v1/mcp/servers); it is started on first use.
// A name in use is an *Error of code conflict.
func (c *Client) AddMCPServer(ctx context.Context, s api.MCPServer) (*api.MCPServer, error) {
	var out api.MCPServer
	if err := c.do(ctx, http.MethodPost, "/v1/mcp/servers", s, &out, http.StatusCreated); err != nil {
		return nil, err
	}
	return &out, nil
}

// RemoveMCPServer unregisters a hosted MCP server and stops it (DELETE /v1/mcp/servers/{name}).
// An unknown name is an *Error of code not_found.
func (c *Client) RemoveMCPServer(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/mcp/servers/"+url.PathEscape(name), nil, nil, http.StatusNoContent)
}

// ApproveMCPServer pins a hosted server's current tool definitions after a change was refused
// (POST /v1/mcp/servers/{name}/approve); the approval is an audit record (mcp.approve).
func (c *Client) ApproveMCPServer(ctx context.Context, name string) (*api.MCPPin, error) {
	var p api.MCPPin
	if err := c.do(ctx, http.MethodPost, "/v1/mcp/servers/"+url.PathEscape(name)+"/approve", nil, &p, http.StatusOK); err != nil {
		return nil, err
	}
	return &p, nil
}
