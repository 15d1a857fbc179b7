package cli

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
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

// A system install's key file (mode 0640, group agentbox) draws no warning: the group's members
// are meant to read it. Group-writable, readable by others, or another group's is warned about.
func TestAPIKeyReadableByServiceGroup(t *testing.T) {
	g, err := user.LookupGroupId(strconv.Itoa(os.Getgid()))
	if err != nil {
		t.Skipf("the group of this process has no name: %v", err)
	}
	defer func(name string) { serviceGroup = name }(serviceGroup)
	// The test's own group stands in for agentbox: files it makes are that group's.
	serviceGroup = g.Name
	dir := t.TempDir()
	path := filepath.Join(dir, apiKeyFile)
	if err := os.WriteFile(path, []byte("abk_key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode os.FileMode
		warn bool
	}{{0o600, false}, {0o640, false}, {0o400, false}, {0o440, false}, {0o660, true}, {0o644, true}, {0o604, true}, {0o650, true}} {
		if err := os.Chmod(path, c.mode); err != nil {
			t.Fatal(err)
		}
		k, err := ensureAPIKey("", dir)
		if err != nil || k.key != "abk_key" || (k.warning != "") != c.warn {
			t.Errorf("mode %v: %+v %v, want warning %v", c.mode, k, err, c.warn)
		}
	}
	serviceGroup = "agentbox-no-such-group"
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if k, _ := ensureAPIKey("", dir); !strings.Contains(k.warning, "chmod 600") || !strings.Contains(k.warning, "chgrp agentbox-no-such-group") {
		t.Errorf("0640 of another group: %q", k.warning)
	}
}
