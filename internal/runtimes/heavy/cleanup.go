package heavy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// cleanLeftovers removes what a daemon that died left in the state directory: its containers
// (killed and deleted through runsc's own state), its bundles and its cgroups. It returns how many
// sandboxes it found.
func (rt *Runtime) cleanLeftovers(ctx context.Context) int {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ids := map[string]bool{}
	if out, err := rt.runsc.command(ctx, nil, "list", "--quiet").Output(); err == nil {
		for _, id := range strings.Fields(string(out)) {
			ids[id] = true
		}
	}
	ents, _ := os.ReadDir(rt.layout.RunDir())
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "ab-") {
			ids[e.Name()] = true
		}
	}
	for id := range ids {
		_ = rt.runsc.command(ctx, nil, "kill", "--all", id, "KILL").Run()
		_ = rt.runsc.command(ctx, nil, "delete", "--force", id).Run()
		_ = os.RemoveAll(filepath.Join(rt.layout.RunDir(), id))
	}
	cleanCgroupParent(rt.cgroupParent)
	return len(ids)
}
