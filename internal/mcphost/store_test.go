package mcphost

import (
	"os"
	"path/filepath"
	"testing"
)

// The daemon's registry follows DATA_DIR/mcp/servers.json as another process (the CLI's
// `agentbox mcp add`/`remove`) rewrites it, without a restart; a write of its own keeps what the
// other wrote; a file that does not parse leaves the servers last read.
func TestRegistryFollowsFile(t *testing.T) {
	dir := t.TempDir()
	daemon, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer daemon.Close()
	cli, err := Open(Options{Dir: dir}) // as `agentbox mcp add` opens it
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	srv := func(name string) Server {
		return Server{Name: name, Image: "node-mcp", Command: []string{"mcp-server-memory"}}
	}

	if err := cli.Add(srv("memory")); err != nil {
		t.Fatal(err)
	}
	if _, ok := daemon.Get("memory"); !ok {
		t.Fatalf("a server the CLI added is not seen by the running daemon: %v", daemon.Names())
	}
	if err := daemon.Add(srv("files")); err != nil { // over the API
		t.Fatal(err)
	}
	if got := cli.Names(); len(got) != 2 {
		t.Fatalf("the CLI sees %v, want memory and files", got)
	}
	if err := cli.Remove("memory"); err != nil {
		t.Fatal(err)
	}
	if _, ok := daemon.Get("memory"); ok {
		t.Fatal("a server the CLI removed is still the daemon's")
	}
	if err := daemon.Add(srv("memory")); err != nil {
		t.Fatalf("adding again a name the CLI removed: %v", err)
	}

	// A broken file: the servers last read stay, and a write is refused rather than lose it.
	if err := os.WriteFile(filepath.Join(dir, "servers.json"), []byte("[{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := daemon.Names(); len(got) != 2 {
		t.Fatalf("after a broken write the daemon lists %v, want the two last read", got)
	}
	if err := daemon.Add(srv("other")); err == nil {
		t.Fatal("a write over an unreadable registry was not refused")
	}
}
