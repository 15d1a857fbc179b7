package api

import "time"

// MCPServer is a hosted MCP server as registered (GET and POST /v1/mcp/servers): a third-party
// MCP server that runs in a heavy (gVisor) sandbox of its own, its tools reached at
// /mcp/servers/NAME and on /mcp as NAME__tool, every call governed.
type MCPServer struct {
	// Name: 1 to 32 lowercase letters, digits and '-'; the prefix of its tools on /mcp.
	Name string `json:"name"`
	// Image is the heavy image its sandbox runs (node-mcp for the reference servers); empty for a
	// remote server.
	Image string `json:"image,omitempty"`
	// Profile is its egress profile; empty: no network (a hosted server), the default profile (a
	// remote one).
	Profile string `json:"profile,omitempty"`
	// Command is its command line inside the sandbox; it speaks MCP on stdio. Empty for a remote
	// server.
	Command []string `json:"command,omitempty"`
	// URL, instead of Image and Command, registers a remote server: its streamable-HTTP
	// endpoint, reached through the egress gateway under Profile.
	URL string `json:"url,omitempty"`
	// Allow, when set, lists the only tools that may be called; Deny lists tools that may not.
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// Added is when it was registered (set by the daemon).
	Added *time.Time `json:"added,omitempty"`
	// Running says its sandbox is up (set by the daemon).
	Running bool `json:"running,omitempty"`
}

// MCPServerList is the body of GET /v1/mcp/servers, by name.
type MCPServerList struct {
	Servers []MCPServer `json:"servers"`
}

// MCPPin is the recorded tool definitions of a hosted server, bound to its image (the answer of
// POST /v1/mcp/servers/{name}/approve).
type MCPPin struct {
	Server string `json:"server"`
	// ImageHash is the hash of the image the definitions were listed from.
	ImageHash string `json:"image_hash"`
	// Hash covers the image hash and every tool's definition.
	Hash string `json:"hash"`
	// Tools are the tools' names with the SHA-256 of each one's definition.
	Tools map[string]string `json:"tools"`
	// Flagged are tools whose description the prompt scanner flagged, with its rules.
	Flagged  map[string][]string `json:"flagged,omitempty"`
	Pinned   time.Time           `json:"pinned"`
	Approved bool                `json:"approved,omitempty"`
}
