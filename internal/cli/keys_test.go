package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/cli"
)

// `agentbox keys`: create prints a key once and the file keeps its hash; list shows ids and
// states, never keys; rotate revokes the old key and prints a new one; the daemon's
// authenticator sees each change at once.
func TestKeysCommand(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	run := func(args ...string) int {
		out.Reset()
		errb.Reset()
		return cli.Main(context.Background(), append(append([]string{"keys"}, args...), "--data-dir", dir), nil, &out, &errb)
	}
	if code := run("create", "--tenant", "acme", "--agent", "ci-bot", "--scopes", "run,sessions"); code != 0 {
		t.Fatalf("create: %d %s", code, errb.String())
	}
	key := strings.TrimSpace(out.String())
	id, _, ok := auth.ParseTenantKey(key)
	if !ok {
		t.Fatalf("create printed %q, not a key", key)
	}
	keys, err := auth.NewKeys("bootstrap-key", filepath.Join(dir, auth.KeysFile))
	if err != nil {
		t.Fatal(err)
	}
	if who, err := keys.Authenticate(key, time.Now()); err != nil || who.Tenant != "acme" || who.Agent != "ci-bot" {
		t.Fatalf("the new key: %+v %v", who, err)
	}
	if code := run("list"); code != 0 || !strings.Contains(out.String(), id) || strings.Contains(out.String(), key) ||
		!strings.Contains(out.String(), "run,sessions") {
		t.Errorf("list: %d %q", code, out.String())
	}
	if code := run("rotate", id); code != 0 {
		t.Fatalf("rotate: %d %s", code, errb.String())
	}
	rotated := strings.TrimSpace(out.String())
	if _, err := keys.Authenticate(key, time.Now()); err == nil {
		t.Error("the rotated-out key still works")
	}
	if who, err := keys.Authenticate(rotated, time.Now()); err != nil || who.Tenant != "acme" || !who.Has(auth.ScopeSessions) {
		t.Errorf("the rotated key: %+v %v", who, err)
	}
	newID, _, _ := auth.ParseTenantKey(rotated)
	if code := run("revoke", newID); code != 0 {
		t.Fatalf("revoke: %d %s", code, errb.String())
	}
	if _, err := keys.Authenticate(rotated, time.Now()); err == nil {
		t.Error("a revoked key still works")
	}
	if code := run("revoke", "0123456789abcdef"); code == 0 || !strings.Contains(errb.String(), "no key") {
		t.Errorf("revoking an unknown key: %d %q", code, errb.String())
	}
	if code := run("create", "--tenant", "acme", "--scopes", "root"); code == 0 || !strings.Contains(errb.String(), "unknown scope") {
		t.Errorf("an unknown scope: %d %q", code, errb.String())
	}
	b, _ := os.ReadFile(filepath.Join(dir, auth.KeysFile))
	if strings.Contains(string(b), "abt_") {
		t.Error("the key file holds a key")
	}
}
