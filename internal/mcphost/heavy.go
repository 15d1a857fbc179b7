package mcphost

import (
	"context"

	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
)

// HeavySpawn runs hosted servers in rt's sandboxes, each in its own, named "mcp:NAME" to the
// egress gateway.
func HeavySpawn(rt *heavy.Runtime) SpawnFunc {
	return func(ctx context.Context, s Server) (Process, string, error) {
		p, err := rt.Spawn(ctx, heavy.SpawnOptions{Image: s.Image, Argv: s.Command, Session: "mcp:" + s.Name, Profile: s.Profile})
		if err != nil {
			return nil, "", err
		}
		return p, p.ImageHash, nil
	}
}
