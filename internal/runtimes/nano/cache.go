package nano

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine"
)

// WarmCache compiles the module into wazero's cache, so worker processes (which may not write it:
// they see the artifacts read-only) only load it. It reports whether the cache was already warm.
// Compiling runs no guest code, so it is safe in this process.
func WarmCache(ctx context.Context, a Artifacts) (hit bool, err error) {
	if err := os.MkdirAll(a.CacheDir(), 0o755); err != nil {
		return false, err
	}
	cfg := engine.Config{WasmPath: a.Wasm(), CacheDir: a.CacheDir()}
	if a.HasStdlib() {
		cfg.StdlibPath = a.Stdlib()
	}
	e, err := engine.New(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer e.Close(ctx)
	// wazero writes cache entries 0600; workers read them as their own unprivileged uid.
	if err := readableByAll(a.CacheDir()); err != nil {
		return false, err
	}
	// A cache load takes ~0.1 s, a compile seconds.
	return e.CompileTime < time.Second, nil
}

// readableByAll adds read permission (and search, on directories) for everyone under dir.
func readableByAll(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode().Perm() | 0o444
		if d.IsDir() {
			mode |= 0o111
		}
		if mode == info.Mode().Perm() {
			return nil
		}
		return os.Chmod(p, mode)
	})
}
