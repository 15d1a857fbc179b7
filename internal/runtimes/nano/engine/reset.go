package engine

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
)

// Resetting an instance instead of starting a new one.
//
// CPython's start-up here is deterministic (fixed clocks and seed until the first run), so every
// instance of an engine parks for the first time with byte-identical linear memory, and at the
// park the guest's whole state is that memory: the module's only global (__stack_pointer) is
// equal at the park point, the working directory and the pre-opened directories live in
// wasi-libc's memory, and the standard library the npm build embeds is in memory too. The first
// instance to park gives the engine its pristine snapshot; every later one is checked against it.
//
// Reset turns an instance that finished a run and parked again cleanly back into a fresh
// interpreter: it copies the pristine memory back and puts back the host's side as a new
// instance has it (an empty private file system laid out anew, the clocks and random source as
// at the first park, empty output buffers). Host state it cannot restore makes it refuse, and
// the caller starts a new instance instead: a memory that grew, a file the guest left open (the
// open file would outlive its file system), a standard stream or the pre-opened directory
// closed or a descriptor renumbered (wazero's descriptor table is not in linear memory), input
// left unread, or a park at any other place than the driver's.

// pristine is an engine's snapshot of a parked, never-used instance.
type pristine struct {
	mem  []byte
	zero []span // 64 KiB-aligned ranges of mem that are all zeros
	sum  [32]byte
	iovs uint32 // where the park's read keeps its iovec array (on the guest's C stack)
}

type span struct{ start, end int }

// zeroSpans lists the all-zero 64 KiB blocks of b, runs of them merged.
func zeroSpans(b []byte) []span {
	var out []span
	for off := 0; off+wasmPage <= len(b); off += wasmPage {
		blk := b[off : off+wasmPage]
		if blk[0] != 0 || !bytes.Equal(blk, zeroBlock[:]) {
			continue
		}
		if n := len(out); n > 0 && out[n-1].end == off {
			out[n-1].end = off + wasmPage
		} else {
			out = append(out, span{off, off + wasmPage})
		}
	}
	return out
}

var zeroBlock [wasmPage]byte

// ErrNotResettable wraps the reason Reset refused.
var ErrNotResettable = errors.New("engine: the instance cannot be reset")

// capture runs when a new instance has parked for the first time: it records what Reset puts
// back, and adopts (or checks against) the engine's pristine snapshot.
func (i *Instance) capture() {
	i.clock0 = i.clock.save()
	if i.e.cfg.NoReset || i.tainted.Load() {
		return
	}
	// Files open at the park (the pre-opened root, which wazero opens lazily) must survive a
	// reset: only the root node keeps its identity, and read-only nodes are shared.
	i.open0 = i.fs.openFiles()
	for _, f := range i.open0 {
		if f.n != i.fs.root && !f.n.ro {
			return
		}
	}
	mem := i.mod.Memory()
	buf, ok := mem.Read(0, mem.Size())
	if !ok {
		return
	}
	e := i.e
	e.pristineMu.Lock()
	defer e.pristineMu.Unlock()
	switch p := e.pristine; {
	case p == nil:
		// Only the non-zero blocks are copied: the zero ones of a large new allocation stay
		// untouched, so the snapshot costs the worker about what its content is, not its size.
		p = &pristine{mem: make([]byte, len(buf)), zero: zeroSpans(buf), iovs: i.parkIovs}
		prev := 0
		for _, z := range p.zero {
			copy(p.mem[prev:z.start], buf[prev:z.start])
			prev = z.end
		}
		copy(p.mem[prev:], buf[prev:])
		p.sum = sha256.Sum256(p.mem)
		e.pristine = p
		i.snap = p
	case p.iovs == i.parkIovs && bytes.Equal(p.mem, buf):
		i.snap = p
	default:
		if !e.pristineWarned {
			e.pristineWarned = true
			e.log.Warn("nano engine: a new interpreter parked with memory unlike the first one's; it will not be reset",
				"size", len(buf), "first_size", len(p.mem))
		}
	}
}

// PristineSum is the SHA-256 of the engine's pristine snapshot, once an instance has parked.
func (e *Engine) PristineSum() ([32]byte, bool) {
	e.pristineMu.Lock()
	defer e.pristineMu.Unlock()
	if e.pristine == nil {
		return [32]byte{}, false
	}
	return e.pristine.sum, true
}

// MemorySum is the SHA-256 of the instance's linear memory. Call it only while it is parked.
func (i *Instance) MemorySum() [32]byte {
	mem := i.mod.Memory()
	buf, _ := mem.Read(0, mem.Size())
	return sha256.Sum256(buf)
}

// Reset makes a parked instance that finished a run a fresh interpreter again, as NewInstance
// returns it, or says why it cannot (an error wrapping ErrNotResettable; the instance is then
// unchanged, and the caller should Close it). See the comment at the top of this file.
func (i *Instance) Reset() error {
	why := ""
	switch {
	case i.e.cfg.NoReset:
		why = "resets are switched off"
	case i.snap == nil:
		why = "it has no pristine snapshot"
	case int(i.mod.Memory().Size()) != len(i.snap.mem):
		why = "its memory grew"
	default:
		why = i.parkedCleanly()
	}
	if why != "" {
		return fmt.Errorf("%w: %s", ErrNotResettable, why)
	}
	mem := i.mod.Memory()
	buf, ok := mem.Read(0, mem.Size())
	if !ok {
		i.dead = true
		return fmt.Errorf("%w: the memory could not be read", ErrNotResettable)
	}
	// Copy the pristine memory back; its all-zero blocks (most of the heap's headroom) are
	// given back to the system instead, so a reset instance holds no more memory than a new one.
	prev := 0
	for _, z := range i.snap.zero {
		copy(buf[prev:z.start], i.snap.mem[prev:z.start])
		i.mem.zero(buf[z.start:z.end])
		prev = z.end
	}
	copy(buf[prev:], i.snap.mem[prev:])
	// The file system as NewInstance lays it out, with the clock as it was then.
	i.clock.setFixed(warmEpoch, warmSeed)
	i.fs.mu.Lock()
	i.fs.clear()
	i.fs.mu.Unlock()
	if err := i.layout(); err != nil {
		i.dead = true
		return fmt.Errorf("%w: %v", ErrNotResettable, err)
	}
	i.clock.restore(i.clock0)
	i.clearRunState()
	i.resets++
	i.pristineNow = true
	// The memory is pristine's: a snapshot with no pages.
	i.trackAs(&snapshot{Build: i.snap.sum, Size: len(buf)}, len(buf))
	return nil
}

// Resets is how many times the instance was reset.
func (i *Instance) Resets() int { return i.resets }

// clearRunState forgets what the last run left beside the guest's memory and files (Reset and
// Restore set those): the memory limit back to the reserve, the full-disk flag, the output
// buffers and the report.
func (i *Instance) clearRunState() {
	i.memLimit.Store(i.e.reserve)
	i.noSpace.Store(false)
	i.stdout.reset(64<<10, nil)
	i.stderr.reset(64<<10, nil)
	i.reportMu.Lock()
	i.report, i.reportBuf = nil, nil
	i.reportMu.Unlock()
}
