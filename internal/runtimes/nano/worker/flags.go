package worker

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine"
)

// Mode is how a worker uses its interpreters.
type Mode string

const (
	// ModeOneShot gives every run a fresh interpreter: a new one, or one reset to its first park.
	ModeOneShot Mode = "oneshot"
	// ModeSession runs every request in one interpreter, the session's, until the daemon asks
	// for its snapshot (OpHibernate); the worker then holds a pristine interpreter again.
	ModeSession Mode = "session"
)

// Config is what the worker's flags say.
type Config struct {
	Mode Mode
	// Engine: the module, its standard library, the compilation cache, the memory reserve.
	Wasm, Stdlib, StdlibGuest, Cache string
	// Warm is how many parked interpreters a one-shot worker keeps (0: every run starts one).
	Warm int
	// MemoryBytes is the memory cap of runs whose request gives none.
	MemoryBytes int64
	// MemoryMaxBytes is the largest cap a run may ask for: every interpreter reserves this much
	// address space (not memory).
	MemoryMaxBytes int64
	// NoReset makes a one-shot worker discard every interpreter after its run instead of
	// resetting it to a fresh one (engine.Instance.Reset); a session worker then cannot
	// hibernate its session (snapshots are taken against the same pristine memory).
	NoReset bool
	// Seccomp says whether to lock the process down after loading. Off only for debugging.
	Seccomp bool
	// NoDirtyPages switches dirty-page tracking off: snapshots and rewinds compare whole
	// memories (for measuring, and for a kernel whose tracking misbehaves).
	NoDirtyPages bool
	// SnapRing is the fd of the memory a session worker shares with the daemon for its step
	// snapshots (wire.Ring), 0 for none: they go through the pipe.
	SnapRing int
	Verbose  bool
}

// Defaults of the flags.
const (
	DefaultWarm        = 2
	DefaultMemoryBytes = 256 << 20
)

// ParseFlags reads the worker's command line (without the program name and the __nano-worker
// argument).
func ParseFlags(args []string, stderr io.Writer) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("agentbox __nano-worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mode := fs.String("mode", string(ModeOneShot), "oneshot: one interpreter per run, a warm pool; session: one interpreter for all runs")
	fs.StringVar(&c.Wasm, "wasm", "", "the CPython WASI module (required)")
	fs.StringVar(&c.Stdlib, "stdlib", "", "the standard library, a zip or directory, for builds that do not embed it")
	fs.StringVar(&c.StdlibGuest, "stdlib-guest", "", "where guests see -stdlib (default "+engine.DefaultStdlibZipGuestPath+" for a zip)")
	fs.StringVar(&c.Cache, "cache", "", "wazero's compilation cache directory (empty: compile every start)")
	fs.IntVar(&c.Warm, "warm", DefaultWarm, "parked interpreters a one-shot worker keeps ready")
	memory := fs.String("memory", strconv.Itoa(DefaultMemoryBytes), "memory cap in bytes of runs that do not give one")
	memoryMax := fs.String("memory-max", "", "largest memory cap in bytes a run may ask for; each interpreter reserves that much address space (default: the larger of -memory and 2 GiB)")
	reset := fs.Bool("reset", true, "one-shot: reset an interpreter that finished its run cleanly to a fresh one instead of starting a new one")
	fs.BoolVar(&c.Seccomp, "seccomp", true, "install the seccomp filter after loading (turn off only to debug outside the jail)")
	fs.BoolVar(&c.Verbose, "v", false, "log debug lines")
	dirty := fs.Bool("dirty-pages", true, "track the pages guests write (userfaultfd, PAGEMAP_SCAN), so that snapshots and rewinds look at those only")
	fs.IntVar(&c.SnapRing, "snap-ring", 0, "session: the fd of the memory shared with the daemon for step snapshots (0: none, they go through stdout)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if !*dirty {
		c.NoDirtyPages = true
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c.Mode = Mode(*mode)
	c.NoReset = !*reset
	if c.Mode != ModeOneShot && c.Mode != ModeSession {
		return c, fmt.Errorf("-mode %q: want %s or %s", *mode, ModeOneShot, ModeSession)
	}
	if c.Wasm == "" {
		return c, errors.New("-wasm is required")
	}
	if c.SnapRing != 0 && c.SnapRing < 3 {
		return c, fmt.Errorf("-snap-ring %d: want an fd above stderr's", c.SnapRing)
	}
	if c.Warm < 0 {
		return c, errors.New("-warm must not be negative")
	}
	var err error
	if c.MemoryBytes, err = parseBytes(*memory); err != nil || c.MemoryBytes <= 0 {
		return c, fmt.Errorf("-memory %q: want a positive number of bytes", *memory)
	}
	c.MemoryMaxBytes = max(c.MemoryBytes, engine.DefaultMemoryReserve)
	if *memoryMax != "" {
		if c.MemoryMaxBytes, err = parseBytes(*memoryMax); err != nil || c.MemoryMaxBytes < c.MemoryBytes {
			return c, fmt.Errorf("-memory-max %q: want a number of bytes no smaller than -memory", *memoryMax)
		}
	}
	if c.MemoryMaxBytes > 4<<30 {
		return c, fmt.Errorf("-memory-max %d: a Wasm32 guest has at most 4 GiB", c.MemoryMaxBytes)
	}
	return c, nil
}

// parseBytes accepts a plain number of bytes or one with a K, M or G suffix (binary units).
func parseBytes(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n * mult, err
}
