package daemon

import (
	"context"
	"path/filepath"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/mcphost"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// HostedSpawn runs hosted MCP servers in rt's sandboxes, each in its own, named "mcp:NAME" to the
// egress gateway. It lives in the wiring because it is where the MCP gateway (internal/mcphost)
// meets a tier: mcphost knows processes, not runtimes.
func HostedSpawn(rt *heavy.Runtime) mcphost.SpawnFunc {
	return func(ctx context.Context, s mcphost.Server) (mcphost.Process, string, error) {
		p, err := rt.Spawn(ctx, heavy.SpawnOptions{Image: s.Image, Argv: s.Command, Session: "mcp:" + s.Name, Profile: s.Profile})
		if err != nil {
			return nil, "", err
		}
		return p, p.ImageHash, nil
	}
}

// OpenHostedMCP opens the registry of hosted MCP servers (DATA_DIR/mcp) over the heavy tier of
// the engine; on a daemon without it, servers can be registered and listed but not called.
func OpenHostedMCP(cfg config.Config, e interface {
	Runtime(sandbox.Tier) (sandbox.Runtime, bool)
}) (*mcphost.Manager, error) {
	opts := mcphost.Options{Dir: filepath.Join(cfg.DataDir, "mcp")}
	if rt, ok := e.Runtime(heavy.Tier); ok {
		if hr, ok := rt.(*heavy.Runtime); ok {
			opts.Spawn = HostedSpawn(hr)
		}
	}
	return mcphost.Open(opts)
}
