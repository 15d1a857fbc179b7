package cli

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/auth"
)

// `agentbox keys` without --config or --data-dir changes the key file of the user's own daemon
// when there is one, else the system install's (as `sudo agentbox keys create` on a machine with
// the agentbox service should).
func TestKeysFindTheSystemInstall(t *testing.T) {
	tmp := t.TempDir()
	cache, sys := filepath.Join(tmp, "cache"), filepath.Join(tmp, "var-lib-agentbox")
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("AGENTBOX_DATA_DIR", "")
	defer func(p string) { systemConfig = p }(systemConfig)
	systemConfig = filepath.Join(tmp, "etc-agentbox-config.json")
	opts := KeysOptions{Tenant: "acme", Scopes: []auth.Scope{auth.ScopeRun}, Out: io.Discard, Now: time.Now}
	count := func(path string) int {
		recs, err := auth.ReadKeyFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}
	own, system := filepath.Join(cache, "agentbox", auth.KeysFile), filepath.Join(sys, auth.KeysFile)

	// No system install: the user's default.
	if err := KeysCreate(opts); err != nil {
		t.Fatal(err)
	}
	if count(own) != 1 {
		t.Errorf("without a system install: %d keys in %s", count(own), own)
	}
	// A system install, and no daemon of this user's (no api_key): the system's.
	if err := os.WriteFile(systemConfig, []byte(`{"data_dir": "`+sys+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := KeysCreate(opts); err != nil {
		t.Fatal(err)
	}
	if count(system) != 1 || count(own) != 1 {
		t.Errorf("with a system install: %d keys in %s, %d in %s", count(system), system, count(own), own)
	}
	// The user's own daemon comes first.
	if err := os.WriteFile(filepath.Join(cache, "agentbox", apiKeyFile), []byte("abk_own\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := KeysCreate(opts); err != nil {
		t.Fatal(err)
	}
	if count(own) != 2 || count(system) != 1 {
		t.Errorf("with a daemon of the user's: %d keys in %s, %d in %s", count(own), own, count(system), system)
	}
	// What the user names wins.
	t.Setenv("AGENTBOX_DATA_DIR", sys)
	if err := os.Remove(filepath.Join(cache, "agentbox", apiKeyFile)); err != nil {
		t.Fatal(err)
	}
	if err := KeysCreate(opts); err != nil {
		t.Fatal(err)
	}
	if count(system) != 2 {
		t.Errorf("AGENTBOX_DATA_DIR: %d keys in %s", count(system), system)
	}
}
