package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine/enginetest"
)

func TestConfigErrors(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []Config{
		{},
		{WasmPath: "/nonexistent/python.wasm"},
		{WasmPath: "/dev/null", MemoryReserveBytes: 5 << 30},
	} {
		if _, err := New(ctx, cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
	b := enginetest.Find(t)
	if _, err := New(ctx, Config{WasmPath: b.Wasm, StdlibPath: "/nonexistent.zip"}); err == nil {
		t.Error("a missing standard library was accepted")
	}
}

// A build that keeps its standard library outside fails to start without it, and says why.
func TestStartFailureIsReported(t *testing.T) {
	b := enginetest.Find(t)
	if b.Stdlib == "" {
		t.Skip("the build embeds its standard library")
	}
	e, err := New(context.Background(), Config{WasmPath: b.Wasm, StdlibPath: b.Stdlib, StdlibGuestPath: "/opt/elsewhere.zip", CacheDir: b.Cache})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	_, err = e.NewInstance(context.Background(), InstanceOptions{})
	if err == nil || !strings.Contains(err.Error(), "start-up") {
		t.Fatalf("err = %v", err)
	}
	t.Log(err)
}
