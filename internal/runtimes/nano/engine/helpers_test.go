package engine

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine/enginetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

var (
	engOnce sync.Once
	eng     *Engine
	engErr  error
)

// testEngine returns the engine shared by this package's tests (compiling once per test binary).
func testEngine(t testing.TB) *Engine {
	t.Helper()
	b := enginetest.Find(t)
	engOnce.Do(func() {
		eng, engErr = New(context.Background(), Config{WasmPath: b.Wasm, StdlibPath: b.Stdlib, CacheDir: b.Cache,
			MemoryReserveBytes: 1 << 30})
	})
	if engErr != nil {
		t.Fatal(engErr)
	}
	return eng
}

func newInstance(t testing.TB) *Instance {
	t.Helper()
	e := testEngine(t)
	runtime.GC() // the collector is off (main_test.go); no guest computes here
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	inst, err := e.NewInstance(ctx, InstanceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Close() })
	return inst
}

// run runs code in a fresh instance with small limits and a 10 s timeout.
func run(t testing.TB, code string) *sandbox.Result {
	t.Helper()
	return runIn(t, newInstance(t), &Request{Code: code})
}

func runIn(t testing.TB, inst *Instance, req *Request) *sandbox.Result {
	t.Helper()
	if req.Limits.Timeout == 0 {
		req.Limits.Timeout = 20 * time.Second
	}
	if req.Limits.MemoryBytes == 0 {
		req.Limits.MemoryBytes = 256 << 20
	}
	res, err := inst.Run(context.Background(), req)
	if err != nil {
		t.Fatalf("run %q: %v", req.Code, err)
	}
	return res
}
