package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/cluster"
)

func TestNodeOfSession(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		id, node string
		ok       bool
	}{
		{cluster.SessionPrefix("n1") + "00ff", "n1", true},
		{"sb_a0b1c2-deadbeef", "a0b1c2", true},
		{"sb_0123456789abcdef", "", false}, // a single machine's id
		{"sb_N1-00", "", false},
		{"sb_n1-", "", false},
		{"sb_-00", "", false},
		{"xx_n1-00", "", false},
		{"", "", false},
	} {
		node, ok := cluster.NodeOfSession(tc.id)
		if node != tc.node || ok != tc.ok {
			t.Errorf("NodeOfSession(%q) = %q, %v; want %q, %v", tc.id, node, ok, tc.node, tc.ok)
		}
	}
}

func TestValidNodeID(t *testing.T) {
	t.Parallel()
	for id, ok := range map[string]bool{"n1": true, "a": true, strings.Repeat("a", 32): true,
		"": false, "N1": false, "n-1": false, "n_1": false, strings.Repeat("a", 33): false} {
		if err := cluster.ValidNodeID(id); (err == nil) != ok {
			t.Errorf("ValidNodeID(%q) = %v", id, err)
		}
	}
}

func TestOpenStatic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kinds := []cluster.Kind{cluster.StaticKind}
	d, err := cluster.Open(ctx, "static:n1=http://127.0.0.1:8421/, n2=https://10.0.0.2:8421", kinds, nil)
	if err != nil {
		t.Fatal(err)
	}
	nodes, _ := d.Nodes(ctx)
	if len(nodes) != 2 || nodes[0] != (cluster.Node{ID: "n1", Addr: "http://127.0.0.1:8421", Healthy: true, Source: "static"}) || nodes[1].ID != "n2" {
		t.Fatalf("nodes %+v", nodes)
	}
	for spec, want := range map[string]string{
		"n1":                             "write KIND:ARG",
		"consul:svc":                     "unknown kind",
		"static:":                        "no nodes",
		"static:n1":                      "write ID=URL",
		"static:N1=http://x":             "node id",
		"static:n1=ftp://x":              "not an http(s) base URL",
		"static:n1=http://a,n1=http://b": "listed twice",
	} {
		if _, err := cluster.Open(ctx, spec, kinds, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) = %v; want an error with %q", spec, err, want)
		}
	}
}

func TestSuccessorsAgreeAndSpread(t *testing.T) {
	nodes := []string{"a", "b", "c", "d"}
	first := map[string]int{}
	for i := range 400 {
		id := fmt.Sprintf("sb_a-%04x", i)
		o := cluster.Successors(id, nodes)
		// Every process that knows the same nodes, in any order, agrees.
		if got := cluster.Successors(id, []string{"d", "c", "b", "a"}); !slices.Equal(got, o) {
			t.Fatalf("%s: %v and %v", id, o, got)
		}
		// A node leaving changes nothing else's order.
		without := cluster.Successors(id, []string{"a", "b", "d"})
		if !slices.Equal(without, slices.DeleteFunc(slices.Clone(o), func(n string) bool { return n == "c" })) {
			t.Fatalf("%s: %v without c is %v", id, o, without)
		}
		first[o[0]]++
	}
	for _, n := range nodes {
		if first[n] < 50 {
			t.Fatalf("sessions ranked first per node: %v (not spread)", first)
		}
	}
	if !slices.Equal(nodes, []string{"a", "b", "c", "d"}) {
		t.Fatal("Successors changed its argument")
	}
}
