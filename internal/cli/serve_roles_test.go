package cli_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/internal/config"
)

// The cluster roles refuse what cannot work at start, saying what to give, before any engine
// starts: a node without its id or shared directory, a gateway without discovery or the nodes'
// key.
func TestServeRolesCheckTheirSettings(t *testing.T) {
	t.Setenv("AGENTBOX_API_KEY", "")
	t.Setenv("AGENTBOX_LISTEN", "")
	for _, tc := range []struct {
		name string
		c    config.ClusterConfig
		want string
	}{
		{"node without id", config.ClusterConfig{Role: "node", SharedDir: "/tmp/x"}, "--node-id"},
		{"node with a bad id", config.ClusterConfig{Role: "node", NodeID: "Node-1", SharedDir: "/tmp/x"}, "[a-z0-9]{1,32}"},
		{"node without shared dir", config.ClusterConfig{Role: "node", NodeID: "n1"}, "--shared-dir"},
		{"gateway without discovery", config.ClusterConfig{Role: "gateway"}, "--discovery"},
		{"gateway with an unknown kind", config.ClusterConfig{Role: "gateway", Discovery: "consul:x"}, "unknown kind"},
		{"gateway without the nodes' key", config.ClusterConfig{Role: "gateway", Discovery: "static:n1=http://127.0.0.1:1"}, "AGENTBOX_API_KEY"},
		{"unknown role", config.ClusterConfig{Role: "worker"}, "not one of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			called := false
			c := tc.c
			if c.Discovery == "consul:x" {
				t.Setenv("AGENTBOX_API_KEY", "k")
			}
			err := cli.Serve(context.Background(), cli.ServeOptions{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Cluster: c,
				Stderr: &bytes.Buffer{}, NewManager: fakeFactory(t, &called)})
			if err == nil || !strings.Contains(err.Error(), tc.want) || called {
				t.Errorf("err %v (want %q), engine started %v", err, tc.want, called)
			}
		})
	}
}
