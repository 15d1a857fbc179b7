package e2b_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/e2b"
	"github.com/agentbox-dev/agentbox/internal/e2b/e2bwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// TestDebugMode: the SDKs' debug mode sends no credential to a sandbox; the debug listener serves
// the processes of its users only, "debug_sandbox_id" is one sandbox made at its first use, and a
// sandbox made outside debug mode is reached by its id.
func TestDebugMode(t *testing.T) {
	f := newFixture(t)
	me := uint32(os.Getuid())
	admin := auth.Identity{Caller: sandbox.Caller{Admin: true}, Scopes: []auth.Scope{auth.ScopeAdmin}}
	get := func(h http.Handler, sandboxID string) (int, string) {
		t.Helper()
		srv := httptest.NewServer(h)
		defer srv.Close()
		req, _ := http.NewRequest("GET", srv.URL+"/health", nil)
		if sandboxID != "" {
			req.Header.Set("E2b-Sandbox-Id", sandboxID)
			req.Header.Set("E2b-Sandbox-Port", "49983")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	ok := f.h.DebugHandler(e2bwire.EnvdPort, e2b.DebugOptions{UIDs: []uint32{me}, Identity: admin, Template: "base"})
	if code, body := get(ok, e2b.DebugSandboxID); code != 200 || body != "envd:/health" {
		t.Fatalf("debug sandbox: %d %s", code, body)
	}
	first := f.target.Load().SessionID
	if code, _ := get(ok, ""); code != 200 || f.target.Load().SessionID != first {
		t.Errorf("the debug sandbox was made again: %d, %s then %s", code, first, f.target.Load().SessionID)
	}
	sb := f.create(f.keyA, map[string]any{"templateID": "base", "allow_internet_access": false})
	if code, body := get(ok, sb.SandboxID); code != 200 || f.target.Load().SandboxID != sb.SandboxID {
		t.Errorf("a sandbox by its id in debug mode: %d %s", code, body)
	}
	other := f.h.DebugHandler(e2bwire.EnvdPort, e2b.DebugOptions{UIDs: []uint32{me + 4242}, Identity: admin, Template: "base"})
	if code, body := get(other, e2b.DebugSandboxID); code != 403 {
		t.Errorf("a process of a user not allowed: %d %s, want 403", code, body)
	}
}
