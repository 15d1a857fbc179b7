package cli

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestEnsureAPIKey(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "d")
	// Concurrent first starts agree on one key.
	var wg sync.WaitGroup
	keys := make([]string, 4)
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := ensureAPIKey("", dir)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k.key
		}()
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if k != keys[0] || len(k) < 40 {
			t.Fatalf("keys %q", keys)
		}
	}
	if k, _ := ensureAPIKey("env", dir); k.key != "env" || k.path != "" {
		t.Errorf("environment key: %+v", k)
	}
	path := filepath.Join(dir, apiKeyFile)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if k, err := ensureAPIKey("", dir); err != nil || k.key != keys[0] || !strings.Contains(k.warning, "chmod 600") {
		t.Errorf("readable key file: %+v %v", k, err)
	}
	if err := os.WriteFile(path, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ensureAPIKey("", dir); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty key file: %v", err)
	}
}
