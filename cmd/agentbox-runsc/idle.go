package main

import (
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"time"
)

// A restore decodes the checkpoint's kernel state into the sentry's Go heap and leaves megabytes
// of garbage and free spans behind; a cell does the same on a smaller scale. An idle sentry
// allocates nothing, so no GC runs to collect that garbage (Go's periodic forced GC comes every
// two minutes) and the scavenger returns free pages only slowly and only above ~10% over the heap
// goal. So once the sentry has been quiet for a tick after allocating, it collects and returns
// its free pages at once: ~5.5 MiB of the ~21 MiB of an idle sandbox's anonymous memory
// (RATIONALE). A busy sentry (a cell running) is left to the ordinary GC.

// tick is how often the sentry's allocations are read. quietBytes is what it may allocate in a
// tick and still count as idle; releaseAfter is how much it must have allocated since the last
// release for another to be worth its collection.
const (
	tick         = time.Second
	quietBytes   = 64 << 10
	releaseAfter = 1 << 20
)

// heapWatch reads the bytes the Go heap has allocated so far (a counter that only grows) and
// releases free memory to the OS; a test replaces both.
type heapWatch struct {
	allocated func() uint64
	release   func()
}

func newHeapWatch() heapWatch {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	return heapWatch{
		allocated: func() uint64 { metrics.Read(s); return s[0].Value.Uint64() },
		release:   debug.FreeOSMemory,
	}
}

// releaseWhenIdle runs for the process's life.
func releaseWhenIdle(w heapWatch, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	var p idlePolicy
	for range t.C {
		if p.step(w.allocated()) {
			w.release()
		}
	}
}

// idlePolicy decides, one tick at a time, when to release.
type idlePolicy struct {
	last, atRelease uint64
	started         bool
}

// step takes the allocation counter at a tick and says whether to release now: the sentry was
// quiet over the last tick, and has allocated releaseAfter or more since the last release (or
// since it started, for the first).
func (p *idlePolicy) step(allocated uint64) bool {
	if !p.started {
		p.started, p.last = true, allocated
		return false
	}
	quiet := allocated-p.last < quietBytes
	p.last = allocated
	if !quiet || allocated-p.atRelease < releaseAfter {
		return false
	}
	p.atRelease = allocated
	return true
}

// subcommand returns runsc's subcommand in args (without the program's name): the first argument
// that is not a flag. runsc starts its own processes (the sandbox's boot, the gofer) with every
// flag as --name=value, so a flag's value is never a separate argument there. "" if none.
func subcommand(args []string) string {
	for _, a := range args {
		if a == "--" {
			return ""
		}
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}

// wantsVersion says whether args ask runsc for its version (-version or --version, =true too).
func wantsVersion(args []string) bool {
	for _, a := range args {
		switch strings.TrimLeft(a, "-") {
		case "version", "version=true", "version=1":
			if strings.HasPrefix(a, "-") {
				return true
			}
		}
	}
	return false
}
