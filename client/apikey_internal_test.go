package client

import (
	"os"
	"path/filepath"
	"testing"
)

// The key of a system install (SystemDataDir/api_key) is found when the environment and the
// user's own data directory have none; the user's own wins when both exist.
func TestAPIKeyFromSystemInstall(t *testing.T) {
	system, own := t.TempDir(), t.TempDir()
	defer func(d string) { systemDataDir = d }(systemDataDir)
	systemDataDir = system
	t.Setenv("AGENTBOX_API_KEY", "")
	t.Setenv("AGENTBOX_DATA_DIR", own)
	if k := APIKeyFromEnv(); k != "" {
		t.Errorf("no key anywhere: %q", k)
	}
	if err := os.WriteFile(filepath.Join(system, "api_key"), []byte("system-key\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if k := APIKeyFromEnv(); k != "system-key" {
		t.Errorf("the system install's key: %q", k)
	}
	// An empty file of the user's is no key: the system's is used.
	if err := os.WriteFile(filepath.Join(own, "api_key"), []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if k := APIKeyFromEnv(); k != "system-key" {
		t.Errorf("an empty key file of the user's: %q", k)
	}
	if err := os.WriteFile(filepath.Join(own, "api_key"), []byte("own-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if k := APIKeyFromEnv(); k != "own-key" {
		t.Errorf("the user's own key first: %q", k)
	}
	t.Setenv("AGENTBOX_API_KEY", "env-key")
	if k := APIKeyFromEnv(); k != "env-key" {
		t.Errorf("the environment first: %q", k)
	}
	if SystemDataDir != "/var/lib/agentbox" {
		t.Errorf("SystemDataDir %q: scripts/install-system.sh and the Python SDK say /var/lib/agentbox", SystemDataDir)
	}
}
