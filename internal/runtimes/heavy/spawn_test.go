package heavy

import (
	"bufio"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// TestSpawnStdio runs the MCP reference server in the node-mcp image and talks JSON-RPC to it over
// the guest channel; then kills it and sees the typed end.
func TestSpawnStdio(t *testing.T) {
	l := testLayout(t)
	if _, err := l.Images().Get("node-mcp"); err != nil {
		testenv.Skip(t, "no node-mcp image: agentbox image build node-mcp ("+err.Error()+")")
	}
	rt := newTestRuntime(t, Options{Warm: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := rt.Spawn(ctx, SpawnOptions{Image: "node-mcp", Argv: []string{"mcp-server-everything"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n"
	if _, err := p.Write([]byte(init)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(p)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("%v (stderr: %s)", err, p.Stderr())
	}
	if !strings.Contains(line, `"serverInfo"`) {
		t.Fatalf("answer: %s", line)
	}
	t.Logf("host stdio: %v", p.stdout != nil)
	// A guest that offers host stdio gets it: the bytes bypass the guest channel.
	if p.b.can(proto.FeatureHostStdio) != (p.stdout != nil) {
		t.Fatalf("guest offers host stdio: %v; the process uses it: %v", p.b.can(proto.FeatureHostStdio), p.stdout != nil)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after kill")
	}
	if p.Err() == nil || !strings.Contains(p.Err().Error(), "exited") {
		t.Fatalf("err = %v", p.Err())
	}
	// Reading past the end says how the process ended, and does not hang.
	read := make(chan error, 1)
	go func() { _, err := r.ReadString('\n'); read <- err }()
	select {
	case err := <-read:
		if err == nil || !strings.Contains(err.Error(), "exited") {
			t.Fatalf("read after the exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read after the exit hangs")
	}
	if _, err := p.Write([]byte("{}\n")); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("write after the exit: %v", err)
	}
}

// TestSpawnNoNetwork: a spawned process with no egress profile reaches nothing.
func TestSpawnNoNetwork(t *testing.T) {
	l := testLayout(t)
	if _, err := l.Images().Get("node-mcp"); err != nil {
		testenv.Skip(t, "no node-mcp image: agentbox image build node-mcp ("+err.Error()+")")
	}
	rt := newTestRuntime(t, Options{Warm: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := rt.Spawn(ctx, SpawnOptions{Image: "node-mcp", Argv: []string{"node", "-e",
		`fetch("http://1.1.1.1/").then(() => console.log("REACHED"), e => console.log("FAILED " + (e.cause && e.cause.code)))`}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	line, err := bufio.NewReader(p).ReadString('\n')
	if err != nil {
		t.Fatalf("%v (stderr: %s)", err, p.Stderr())
	}
	if !strings.HasPrefix(line, "FAILED") {
		t.Fatalf("a process with no egress profile reached the network: %q", line)
	}
	t.Logf("%s", strings.TrimSpace(line))
}
