//go:build linux && agentbox_wazeroguard

package engine

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// These tests run in the build with guard pages only (scripts/wazero-guard.sh; scripts/test.sh
// runs the nano packages with it): there, compiled code has no bounds checks and the memory's
// reservation is what keeps a guest inside it.

// guardModule is, in the text format:
//
//	(module (memory 1 <max>)
//	  (func (export "load") (param i32) (result i32) local.get 0 i32.load)
//	  (func (export "store") (param i32 i32) local.get 0 local.get 1 i32.store)
//	  (func (export "grow") (param i32) (result i32) local.get 0 memory.grow)
//	  (func (export "far") (param i32) (result i64) local.get 0 i64.load offset=0xffffffff))
//
// "far" forms the largest address a Wasm32 access can: index 0xffffffff plus offset
// 0xffffffff plus 8 bytes, just under 8 GiB past the memory's base.
func guardModule(maxPages uint32) []byte {
	u := func(v uint64) []byte { // unsigned LEB128
		var b []byte
		for {
			c := byte(v & 0x7f)
			v >>= 7
			if v != 0 {
				b = append(b, c|0x80)
				continue
			}
			return append(b, c)
		}
	}
	section := func(id byte, body ...[]byte) []byte {
		c := bytes.Join(body, nil)
		return append(append([]byte{id}, u(uint64(len(c)))...), c...)
	}
	vec := func(items ...[]byte) []byte { return append(u(uint64(len(items))), bytes.Join(items, nil)...) }
	name := func(s string) []byte { return append(u(uint64(len(s))), s...) }
	body := func(code ...byte) []byte {
		c := append([]byte{0}, append(code, 0x0b)...) // no locals; end
		return append(u(uint64(len(c))), c...)
	}
	const i32, i64 = 0x7f, 0x7e
	return bytes.Join([][]byte{
		{0, 'a', 's', 'm', 1, 0, 0, 0},
		section(1, vec( // types
			[]byte{0x60, 1, i32, 1, i32},   // 0: (i32) -> i32
			[]byte{0x60, 2, i32, i32, 0},   // 1: (i32 i32) -> ()
			[]byte{0x60, 1, i32, 1, i64})), // 2: (i32) -> i64
		section(3, vec([]byte{0}, []byte{1}, []byte{0}, []byte{2})), // functions
		section(5, vec(append([]byte{1}, append(u(1), u(uint64(maxPages))...)...))),
		section(7, vec( // exports
			append(name("load"), 0, 0), append(name("store"), 0, 1),
			append(name("grow"), 0, 2), append(name("far"), 0, 3))),
		section(10, vec( // code
			body(0x20, 0, 0x28, 2, 0),
			body(0x20, 0, 0x20, 1, 0x36, 2, 0),
			body(0x20, 0, 0x40, 0),
			body(append([]byte{0x20, 0, 0x29, 3}, u(0xffffffff)...)...))),
	}, nil)
}

// guardInstance compiles guardModule for guard pages and instantiates it with the engine's own
// allocator, its memory allowed to grow to limit bytes.
func guardInstance(t *testing.T, limit uint64) (api.Module, *linearMemory) {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	t.Cleanup(func() { rt.Close(ctx) })
	cm, err := rt.CompileModule(withGuardPages(ctx), guardModule(uint32(limit/wasmPage)))
	if err != nil {
		t.Fatal(err)
	}
	mem := &linearMemory{}
	t.Cleanup(mem.unmap)
	mod, err := rt.InstantiateModule(experimental.WithMemoryAllocator(ctx,
		mem.allocator(limit, func() uint64 { return limit })), cm, wazero.NewModuleConfig())
	if err != nil {
		t.Fatal(err)
	}
	return mod, mem
}

func call(t *testing.T, mod api.Module, fn string, args ...uint64) (uint64, error) {
	t.Helper()
	r, err := mod.ExportedFunction(fn).Call(context.Background(), args...)
	if err != nil || len(r) == 0 {
		return 0, err
	}
	return r[0], nil
}

func TestGuardPagesMemoryReservesTheGuardRegion(t *testing.T) {
	_, mem := guardInstance(t, 4*wasmPage)
	if len(mem.buf) < experimental.GuardPageReservation {
		t.Fatalf("the memory reserves %d bytes, less than the %d every Wasm32 address needs", len(mem.buf), experimental.GuardPageReservation)
	}
	if !GuardPages {
		t.Fatal("GuardPages is false in the build with guard pages")
	}
}

func TestGuardPagesLoadsStoresAndGrowsToItsCap(t *testing.T) {
	const limit = 4 * wasmPage
	mod, _ := guardInstance(t, limit)
	must := func(v uint64, err error) uint64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, addr := range []uint64{0, 12345, wasmPage - 4} {
		must(call(t, mod, "store", addr, addr+7))
		if got := must(call(t, mod, "load", addr)); got != addr+7 {
			t.Fatalf("load(%d) = %d after storing %d", addr, got, addr+7)
		}
	}
	// Grow one page at a time up to the cap; each new page can be written and read back.
	for pages := uint64(1); pages < limit/wasmPage; pages++ {
		if prev := must(call(t, mod, "grow", 1)); prev != pages {
			t.Fatalf("grow from %d pages returned %d", pages, int32(prev))
		}
		addr := pages*wasmPage + wasmPage - 4
		must(call(t, mod, "store", addr, 0xabcd))
		if got := must(call(t, mod, "load", addr)); got != 0xabcd {
			t.Fatalf("after growing to %d pages, load at the new end = %#x", pages+1, got)
		}
	}
	if r := must(call(t, mod, "grow", 1)); int32(r) != -1 {
		t.Fatalf("grow past the cap returned %d, want -1", int32(r))
	}
	if mod.Memory().Size() != limit {
		t.Fatalf("memory is %d bytes, want %d", mod.Memory().Size(), limit)
	}
}

func TestGuardPagesRefuseAMemoryWithoutThem(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	defer rt.Close(ctx)
	cm, err := rt.CompileModule(withGuardPages(ctx), guardModule(4))
	if err != nil {
		t.Fatal(err)
	}
	// wazero's own memory has no guard region: code without bounds checks must not run on it.
	if _, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig()); err == nil || !strings.Contains(err.Error(), "guard-page") {
		t.Fatalf("instantiating code without bounds checks on a plain memory: %v, want an error", err)
	}
}

// guardFaultEnv makes the test binary, re-executed by TestGuardPagesOutOfBoundsEndsOnlyItsProcess,
// do the out-of-bounds access it names.
const guardFaultEnv = "AGENTBOX_TEST_GUARD_FAULT"

func TestGuardPagesOutOfBoundsEndsOnlyItsProcess(t *testing.T) {
	if what := os.Getenv(guardFaultEnv); what != "" {
		mod, _ := guardInstance(t, 2*wasmPage)
		var err error
		switch what {
		case "load":
			_, err = call(t, mod, "load", wasmPage) // the first byte past the memory
		case "store":
			_, err = call(t, mod, "store", wasmPage-2, 1) // straddles the end
		case "far":
			_, err = call(t, mod, "far", 0xffffffff)
		case "grown":
			// Past the end after a growth (the new end, not the old, is the limit).
			if _, err = call(t, mod, "grow", 1); err == nil {
				_, err = call(t, mod, "load", 2*wasmPage)
			}
		}
		// Reaching this line means the access did not fault: the parent sees it.
		os.Stdout.WriteString("NO FAULT: " + what + " returned, err=" + errString(err) + "\n")
		os.Exit(0)
	}
	// In this process, a guard-page instance keeps working while the children fault.
	mine, _ := guardInstance(t, 2*wasmPage)
	if _, err := call(t, mine, "store", 100, 42); err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"load", "store", "far", "grown"} {
		t.Run(what, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestGuardPagesOutOfBoundsEndsOnlyItsProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), guardFaultEnv+"="+what)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || strings.Contains(stdout.String(), "NO FAULT") {
				t.Fatalf("the out-of-bounds %s did not end its process: err %v\nstdout: %s\nstderr: %.2000s", what, err, stdout.String(), stderr.String())
			}
			// The daemon reads the worker's log like this (proc.logStderr) and reports the
			// run with GuestFaultError.
			var w FaultWatch
			for _, line := range strings.Split(stderr.String(), "\n") {
				w.Line(line)
			}
			if !w.Faulted() {
				t.Fatalf("the log of a process whose guest faulted (%v) is not recognised as a guest fault:\n%.3000s", err, stderr.String())
			}
			if e := GuestFaultError(); e.Kind != sandbox.KindInternal || e.Hint == "" {
				t.Fatalf("GuestFaultError = %+v", e)
			}
		})
	}
	if got, err := call(t, mine, "load", 100); err != nil || got != 42 {
		t.Fatalf("this process's guest after the children faulted: load = %d, %v", got, err)
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
