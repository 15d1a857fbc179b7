package engine

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/dirtypages"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
)

// Config says what an Engine runs. Zero values take the documented defaults.
type Config struct {
	// WasmPath is the CPython WASI module (a preview-1 command module). Required.
	WasmPath string
	// StdlibPath is the standard library on the host, a zip file or a directory, for builds that
	// keep it outside the module (the -O2 build: python311.zip). Empty for builds that embed it
	// (the npm build). It is read into memory by New and shown to every guest read-only.
	StdlibPath string
	// StdlibGuestPath is where guests see StdlibPath. Default: /usr/local/lib/python311.zip for
	// a file, /usr/local/lib/python3.11 for a directory (where CPython's prefix /usr/local looks).
	StdlibGuestPath string
	// PythonHome is PYTHONHOME in the guest. Default: /usr/local when StdlibPath is set (without
	// it CPython warns about missing platform libraries at every start), unset otherwise.
	PythonHome string
	// CacheDir is wazero's compilation cache. Empty: no cache (every New compiles, 1.5–2.5 s for
	// the npm build). Clear it after changing wazero's compiler settings: its key ignores them.
	CacheDir string
	// MemoryReserveBytes is the most memory an instance of this engine can ever have: each
	// instance reserves this much address space (not memory) up front, and a run's memory cap may
	// be anything up to it. Default 2 GiB; at most 4 GiB (Wasm32).
	MemoryReserveBytes int64
	// CompileWorkers is how many goroutines compile the module when the cache misses. Default
	// GOMAXPROCS.
	CompileWorkers int
	// Logger receives the engine's few log lines. Default slog.Default().
	Logger *slog.Logger
	// NoReset switches Instance.Reset off (it then always refuses): every one-shot run takes a
	// newly started interpreter.
	NoReset bool
	// DirtyPages, when set, tracks which pages of each instance's memory its guest writes, so
	// that a snapshot or a rewind looks at those pages only (snapshot.go). Nil: they compare
	// the whole memory.
	DirtyPages *dirtypages.Tracker

	// checked compiles with wazero's bounds checks even in the build with guard pages: the
	// compute bench's baseline in the same process (compute_bench_test.go).
	checked bool
}

// DefaultMemoryReserve is Config.MemoryReserveBytes's default.
const DefaultMemoryReserve = 2 << 30

// DefaultStdlibZipGuestPath is where a zipped standard library is shown by default.
const DefaultStdlibZipGuestPath = "/usr/local/lib/python311.zip"

// Engine is one wazero runtime with the CPython module compiled once. Instances made from it are
// independent interpreters. An Engine is safe for concurrent use; it lives in a worker process.
//
// New does all file access (the module, the standard library, the compilation cache): after it
// returns, the engine opens no file, so the worker can be locked down.
type Engine struct {
	cfg      Config
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	stdlib   *node // read-only tree or file; nil when the module embeds its standard library
	reserve  uint64
	log      *slog.Logger
	// CompileTime is how long loading (or compiling) the module took.
	CompileTime time.Duration

	pristineMu     sync.Mutex
	pristine       *pristine // the first parked instance's memory (reset.go)
	pristineWarned bool
}

// New loads the module and the standard library into memory and compiles the module (or loads it
// from the cache).
func New(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.WasmPath == "" {
		return nil, errors.New("engine: no CPython WASI module given")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MemoryReserveBytes <= 0 {
		cfg.MemoryReserveBytes = DefaultMemoryReserve
	}
	if cfg.MemoryReserveBytes > 4<<30 {
		return nil, fmt.Errorf("engine: memory reserve %d is above the 4 GiB a Wasm32 memory can have", cfg.MemoryReserveBytes)
	}
	if cfg.CompileWorkers <= 0 {
		cfg.CompileWorkers = runtime.GOMAXPROCS(0)
	}
	e := &Engine{cfg: cfg, log: cfg.Logger, reserve: uint64(cfg.MemoryReserveBytes) &^ (wasmPage - 1)}
	wasm, err := os.ReadFile(cfg.WasmPath)
	if err != nil {
		return nil, fmt.Errorf("engine: read CPython module: %w", err)
	}
	if cfg.StdlibPath != "" {
		if e.stdlib, err = loadStdlib(cfg.StdlibPath); err != nil {
			return nil, err
		}
		if e.cfg.StdlibGuestPath == "" {
			if e.stdlib.kind == kindDir {
				e.cfg.StdlibGuestPath = "/usr/local/lib/python3.11"
			} else {
				e.cfg.StdlibGuestPath = DefaultStdlibZipGuestPath
			}
		}
		if e.cfg.PythonHome == "" {
			e.cfg.PythonHome = "/usr/local"
		}
		if !path.IsAbs(e.cfg.StdlibGuestPath) || path.Clean(e.cfg.StdlibGuestPath) != e.cfg.StdlibGuestPath || e.cfg.StdlibGuestPath == "/" {
			return nil, fmt.Errorf("engine: stdlib guest path %q must be absolute and clean", e.cfg.StdlibGuestPath)
		}
		if under(e.cfg.StdlibGuestPath, "/home/user") || under(e.cfg.StdlibGuestPath, ctlDir) {
			return nil, fmt.Errorf("engine: stdlib guest path %q collides with the work or control directory", e.cfg.StdlibGuestPath)
		}
	}

	rc := wazero.NewRuntimeConfigCompiler().
		WithDebugInfoEnabled(false).
		WithMemoryLimitPages(uint32(e.reserve / wasmPage)).
		WithMemoryCapacityFromMax(true)
	if cfg.CacheDir != "" {
		cache, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("engine: compilation cache: %w", err)
		}
		rc = rc.WithCompilationCache(cache)
	}
	e.rt = wazero.NewRuntimeWithConfig(ctx, rc)
	if err := instantiateWASI(ctx, e.rt); err != nil {
		e.rt.Close(ctx)
		return nil, err
	}
	start := time.Now()
	cctx := experimental.WithCompilationWorkers(ctx, cfg.CompileWorkers)
	if !cfg.checked {
		cctx = withGuardPages(cctx)
	}
	e.compiled, err = e.rt.CompileModule(cctx, wasm)
	if err != nil {
		e.rt.Close(ctx)
		return nil, fmt.Errorf("engine: compile CPython module: %w", err)
	}
	e.CompileTime = time.Since(start)
	if _, ok := e.compiled.ExportedFunctions()["_start"]; !ok {
		e.rt.Close(ctx)
		return nil, errors.New("engine: the module has no _start: not a WASI command module")
	}
	wasm = nil
	// Compiling leaves hundreds of MB of garbage; give it back now rather than at the next GC.
	debug.FreeOSMemory()
	return e, nil
}

// InstanceAddressSpace is the address space one instance's memory reserves when runs may ask
// for up to maxMemory bytes: the cap itself, or the guard region in the build with guard pages
// (guard_on.go). The worker's RLIMIT_AS counts it.
func InstanceAddressSpace(maxMemory int64) uint64 {
	return max(uint64(maxMemory), guardReservation)
}

// MemoryReserve is the largest memory cap a run on this engine's instances can have.
func (e *Engine) MemoryReserve() int64 { return int64(e.reserve) }

// Close releases the runtime. Close instances first.
func (e *Engine) Close(ctx context.Context) error { return e.rt.Close(ctx) }

const wasmPage = 1 << 16

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// loadStdlib reads a zip file (kept as one read-only file) or a directory tree into memory.
func loadStdlib(p string) (*node, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("engine: standard library: %w", err)
	}
	t := &roTree{nextIno: 1 << 40}
	if !st.IsDir() {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("engine: read standard library: %w", err)
		}
		if _, err := zip.NewReader(bytes.NewReader(b), int64(len(b))); err != nil {
			return nil, fmt.Errorf("engine: standard library %s is not a zip file: %w", p, err)
		}
		return t.file(b, st.ModTime().UnixNano()), nil
	}
	root := t.dir(st.ModTime().UnixNano())
	dirs := map[string]*node{".": root}
	err = filepath.WalkDir(p, func(fp string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(p, fp)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		parent := dirs[path.Dir(rel)]
		if parent == nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			n := t.dir(info.ModTime().UnixNano())
			parent.children[path.Base(rel)] = n
			parent.nlink++
			dirs[rel] = n
		case info.Mode().IsRegular():
			b, err := os.ReadFile(fp)
			if err != nil {
				return err
			}
			parent.children[path.Base(rel)] = t.file(b, info.ModTime().UnixNano())
		}
		return nil // symbolic links and special files are left out
	})
	if err != nil {
		return nil, fmt.Errorf("engine: read standard library: %w", err)
	}
	return root, nil
}
