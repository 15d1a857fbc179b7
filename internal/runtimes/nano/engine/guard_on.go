//go:build linux && agentbox_wazeroguard

package engine

import (
	"context"
	"unsafe"

	"github.com/tetratelabs/wazero/experimental"
)

// This file is built only by the project's own build (scripts/wazero-guard.sh), which compiles
// wazero with the patch in internal/runtimes/nano/wazeroguard and sets the agentbox_wazeroguard
// tag: the CPython module is then compiled without a bounds check on each load and store, and
// every guest memory reserves the guard region that makes that sound (memory_linux.go, and
// "Guard pages instead of bounds checks" in docs/RATIONALE.md). A plain `go build` of the tree
// uses upstream wazero and guard_off.go: checked code, a reservation of the memory cap only.

// GuardPages reports whether this build compiles guests without bounds checks, relying on
// guard pages (an access out of bounds kills the worker process; see Instance.Run's callers).
const GuardPages = true

// guardReservation is the address space each guest memory reserves.
const guardReservation = experimental.GuardPageReservation

// withGuardPages asks wazero to compile for guard-page memories.
func withGuardPages(ctx context.Context) context.Context { return experimental.WithGuardPages(ctx) }

// GuardPageReservation implements experimental.GuardPageMemory: the whole mapping is reserved,
// and only its first committed bytes are readable and writable (Reallocate); wazero refuses to
// instantiate code compiled without bounds checks on a memory that does not say so.
func (m *linearMemory) GuardPageReservation() (uintptr, uint64) {
	return uintptr(unsafe.Pointer(unsafe.SliceData(m.buf))), uint64(len(m.buf))
}
