package config_test

import (
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/config"
)

func TestClusterRoles(t *testing.T) {
	base := config.Default()
	base.DataDir = "/data"
	for _, tc := range []struct {
		name  string
		c     config.ClusterConfig
		err   string
		state string
	}{
		{name: "single", c: config.ClusterConfig{}, state: "/data"},
		{name: "node", c: config.ClusterConfig{Role: config.RoleNode, NodeID: "n1", SharedDir: "/shared"}, state: "/data/nodes/n1"},
		{name: "node advertises", c: config.ClusterConfig{Role: config.RoleNode, NodeID: "n1", SharedDir: "/s", Advertise: "http://10.0.0.5:8421"}, state: "/data/nodes/n1"},
		{name: "node without id", c: config.ClusterConfig{Role: config.RoleNode, SharedDir: "/s"}, err: "--node-id"},
		{name: "node with a bad id", c: config.ClusterConfig{Role: config.RoleNode, NodeID: "N-1", SharedDir: "/s"}, err: "[a-z0-9]{1,32}"},
		{name: "node without shared dir", c: config.ClusterConfig{Role: config.RoleNode, NodeID: "n1"}, err: "--shared-dir"},
		{name: "node with a bad advertise", c: config.ClusterConfig{Role: config.RoleNode, NodeID: "n1", SharedDir: "/s", Advertise: "10.0.0.5"}, err: "advertise"},
		{name: "gateway", c: config.ClusterConfig{Role: config.RoleGateway, Discovery: "static:n1=http://x"}, state: "/data"},
		{name: "gateway without discovery", c: config.ClusterConfig{Role: config.RoleGateway}, err: "--discovery"},
		{name: "unknown role", c: config.ClusterConfig{Role: "worker"}, err: "not one of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			c.Cluster = tc.c
			err := c.Validate()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Validate() = %v; want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.StatePath() != tc.state || c.AuditDir() != tc.state+"/audit" || c.SessionsPath() != tc.state+"/sessions" {
				t.Fatalf("state in %s, audit %s, sessions %s; want under %s", c.StatePath(), c.AuditDir(), c.SessionsPath(), tc.state)
			}
			if c.KeysPath() != "/data/keys.json" || c.EgressDir() != "/data/egress" {
				t.Fatalf("keys %s and egress %s must stay shared in the data directory", c.KeysPath(), c.EgressDir())
			}
		})
	}
}

func TestClusterFromEnv(t *testing.T) {
	t.Setenv("AGENTBOX_ROLE", "node")
	t.Setenv("AGENTBOX_NODE_ID", "n7")
	t.Setenv("AGENTBOX_SHARED_DIR", "/shared")
	t.Setenv("AGENTBOX_ADVERTISE", "http://127.0.0.1:9")
	t.Setenv("AGENTBOX_CLUSTER_TOKEN", "tok")
	c, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Cluster != (config.ClusterConfig{Role: config.RoleNode, NodeID: "n7", SharedDir: "/shared", Advertise: "http://127.0.0.1:9", Token: "tok"}) {
		t.Fatalf("cluster %+v", c.Cluster)
	}
}
