//go:build linux

package guest

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Config is what the agent needs to know about its sandbox. The defaults match the images
// `agentbox image build` makes.
type Config struct {
	// Python is the interpreter. Default /usr/bin/python3.
	Python string
	// WorkDir is where runs start and relative paths land. Default sandbox.WorkDir.
	WorkDir string
	// UID and GID the Python process runs as. Default 1000. The file operations run as them too.
	UID, GID int
	// Roots are the directories the file operations serve besides WorkDir (files.go). Nil:
	// DefaultRoots (/tmp).
	Roots []string
	// Env is the Python process's base environment.
	Env []string
	// HostStdin and HostStdout are the host pipes the daemon passed into the sandbox for one
	// spawned child's stdin and stdout (proto.FeatureHostStdio); nil without. Main finds them.
	HostStdin, HostStdout *os.File
}

// Main parses the flags, starts Python and serves the daemon on stdin/stdout until stdin ends.
func Main(args []string) int {
	cfg := Config{}
	fs := flag.NewFlagSet("agentbox-guest", flag.ContinueOnError)
	fs.StringVar(&cfg.Python, "python", "/usr/bin/python3", "Python interpreter")
	fs.StringVar(&cfg.WorkDir, "workdir", sandbox.WorkDir, "work directory")
	fs.IntVar(&cfg.UID, "uid", 1000, "uid of the Python process")
	fs.IntVar(&cfg.GID, "gid", 1000, "gid of the Python process")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log.SetFlags(0)
	log.SetPrefix("agentbox-guest: ")
	// One P: the agent dispatches; the work is Python's, in its own process. With more, every
	// goroutine a pipe's answer readies wakes another thread to look for work (a futex hand-off,
	// ~45 µs of the sandbox's CPU under gVisor, rawio.go), and the runtime reads the CPU count
	// again every second.
	runtime.GOMAXPROCS(1)
	cfg.HostStdin, cfg.HostStdout = hostStdio()
	in, out := daemonIO()
	if err := Serve(cfg, in, out); err != nil {
		log.Print(err)
		return 1
	}
	return 0
}

// agent is the state of one guest.
type agent struct {
	cfg Config

	wmu sync.Mutex
	out io.Writer

	mu       sync.Mutex
	py       *python    // the current Python process
	run      *activeRun // the run in progress, nil between runs
	runs     int
	restarts int
	reaper   *reaper

	egress egress

	children map[uint64]*child // OpSpawn's processes by request ID

	// Runs and snapshot requests, in order (snaps.go).
	serial     chan func()
	serialOnce sync.Once
	// Kept snapshots, why recent ones were dropped, and which snapshot copy each live file of
	// the work directory equals (snaps.go).
	snaps   map[uint64]*snap
	dropped map[uint64]string
	live    map[string]liveEntry
	// base is the entries the next snapshot's changes apply to (the last snapshot's or the
	// rewound-to one's); storeRefs counts the kept snapshots and the base naming each copy,
	// dirRefs the copies named in each snapshot's directory; watch says what changed (watch.go).
	base      map[string]snapEntry
	storeRefs map[string]int
	dirRefs   map[uint64]int
	watch     *fileWatch
	// prefork is the Python process that forked after its last cell (RunRequest.ForkAfter) and
	// whose "forked" report the next snapshot takes (snaps.go); nil when none is pending.
	prefork *python
	// killed are the snapshot processes dropped and not yet seen ended (snaps.go, collect),
	// reapQueued whether a reap request waits in the queue.
	killed     map[int]time.Time
	reapQueued bool
	// files is the work directory as the last run left it, kept for the next run while nothing
	// else may have changed it; filesGen counts the requests that may have (run.go, takeFiles).
	files    map[string]fileState
	filesGen uint64
	// stepFiles is held from a run's result until the files of the step's snapshot that rides
	// on it (RunRequest.SnapAfter) are copied: a write or delete of the files API sent once the
	// result is out waits for it, so the step's snapshot is the files the cell left
	// (stepFilesHeld says whether it is held; guarded by mu).
	stepFiles     sync.Mutex
	stepFilesHeld bool
	// snapDirMade is the SnapDir made (snaps.go, makeSnapDir); mapsRead counts the reads of
	// /proc for mapped files (mappedHere).
	snapDirMade string
	mapsRead    uint64
	// lastMapped is the files the last snapshot (or the rewound-to one) found mapped shared and
	// writable (snaps.go, withLastMapped).
	lastMapped map[string]bool
}

// Serve runs the agent over in/out. It returns when in ends (nil) or breaks (an error); either
// way every process it started is killed.
func Serve(cfg Config, in io.Reader, out io.Writer) error {
	if cfg.Python == "" {
		cfg.Python = "/usr/bin/python3"
	}
	if cfg.WorkDir == "" {
		cfg.WorkDir = sandbox.WorkDir
	}
	if cfg.Env == nil {
		cfg.Env = defaultEnv(cfg.WorkDir)
	}
	a := &agent{cfg: cfg, out: out, reaper: newReaper()}
	// Orphans come to the agent even where it is not PID 1 (tests): a parked snapshot's parent
	// is the Python process that forked it, and a rewind ends that process (snaps.go).
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil {
		return fmt.Errorf("work directory: %w", err)
	}
	_ = os.Chown(cfg.WorkDir, cfg.UID, cfg.GID)
	py, err := a.startPython()
	if err != nil {
		return err
	}
	a.py = py
	defer a.killAll()
	features := []string{proto.FeatureSnapshots, proto.FeatureContexts, proto.FeatureStepSnapshots, proto.FeatureQuietSnaps}
	if cfg.HostStdin != nil && cfg.HostStdout != nil {
		features = append(features, proto.FeatureHostStdio)
	}
	if err := a.send(&proto.Frame{Op: proto.OpHello, Version: proto.Version, PythonVersion: py.version,
		Features: features}); err != nil {
		return err
	}
	for {
		var f proto.Frame
		if err := proto.Read(in, &f, 0); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading from the daemon: %w", err)
		}
		if f.Op == proto.OpShutdown {
			return nil
		}
		if err := a.dispatch(&f); err != nil {
			return err
		}
	}
}

func defaultEnv(workdir string) []string {
	return []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + workdir,
		"USER=user",
		"LOGNAME=user",
		"LANG=C.UTF-8",
		"TMPDIR=/tmp",
		// For the code's own Python subprocesses: the REPL gives matplotlib a backend of its
		// own (see repl.py), which returns figures as artifacts.
		"MPLBACKEND=Agg",
		"MPLCONFIGDIR=/var/cache/agentbox/matplotlib",
		"PYTHONDONTWRITEBYTECODE=1",
		MallocTunables,
	}
}

// MallocTunables keeps freed memory in glibc's heap for reuse instead of handing it back to the
// kernel (exported for the heavy bench's like-for-like native baseline): blocks up to 32 MiB come from the heap (not a fresh mmap each), and free memory at its
// top is trimmed only past 64 MiB. Under gVisor every first touch of a page the process got back
// from the kernel is a fault the sentry serves (~5x the native cost), and numpy and pandas
// allocate and free arrays of megabytes all the time, so glibc's default (return a freed mmap at
// once, trim past 128 KiB) made a pandas-bound cell ~1.9x slower than in a session where the
// heap was already faulted in. The price: up to 64 MiB freed by the code stays charged to the
// sandbox until reused (heavy/FIGURES.md, "pandas-bound cells"; docs/RATIONALE.md).
const MallocTunables = "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=67108864"

// dispatch serves one request. Runs go on in their own goroutine so that interrupts and file
// operations are served while code runs.
func (a *agent) dispatch(f *proto.Frame) error {
	switch f.Op {
	case proto.OpRun, proto.OpInterrupt, proto.OpStats, proto.OpReadFile, proto.OpListFiles,
		proto.OpSnapshot, proto.OpDropSnaps, proto.OpConnOpen, proto.OpConnData, proto.OpConnAck, proto.OpConnClose:
		// These leave the work directory as it is.
	default:
		a.filesChanged()
	}
	switch f.Op {
	case proto.OpRun:
		if f.Run == nil {
			return a.fail(f.ID, sandbox.KindInvalidRequest, "run without a request")
		}
		a.mu.Lock()
		busy := a.run != nil
		a.mu.Unlock()
		if busy {
			err := a.fail(f.ID, sandbox.KindConflict, "a run is already in progress")
			if sa := f.Run.SnapAfter; sa != nil {
				_ = a.fail(sa.ID, sandbox.KindConflict, "the run was refused: there is no step to snapshot")
			}
			return err
		}
		r := newActiveRun(f.ID, f.Run)
		a.mu.Lock()
		a.run = r
		a.mu.Unlock()
		a.enqueue(func() { a.doRun(r) })
		return nil
	case proto.OpSnapshot, proto.OpRewind, proto.OpDropSnaps:
		a.dispatchSnaps(f)
		return nil
	case proto.OpInterrupt:
		a.mu.Lock()
		r := a.run
		a.mu.Unlock()
		if r != nil && (f.ID == 0 || f.ID == r.id) {
			r.interrupt(f.Grace)
		}
		return nil
	case proto.OpWriteFile:
		a.waitStepFiles()
		return a.answer(f.ID, a.writeFile(f.Path, f.Content, f.Mode))
	case proto.OpReadFile:
		b, err := a.readFile(f.Path)
		if err != nil {
			return a.answer(f.ID, err)
		}
		return a.send(&proto.Frame{Op: proto.OpFile, ID: f.ID, Path: f.Path, Content: b})
	case proto.OpListFiles:
		entries, err := a.listFiles(f.Path)
		if err != nil {
			return a.answer(f.ID, err)
		}
		return a.send(&proto.Frame{Op: proto.OpFiles, ID: f.ID, Path: f.Path, Entries: entries})
	case proto.OpDeleteFile:
		a.waitStepFiles()
		return a.answer(f.ID, a.deleteFile(f.Path))
	case proto.OpStats:
		return a.send(&proto.Frame{Op: proto.OpStats, ID: f.ID, Stats: a.stats()})
	case proto.OpEgress:
		return a.answer(f.ID, a.enableEgress(f.CA, f.Port))
	case proto.OpSpawn:
		return a.spawn(f.ID, f.Spawn)
	case proto.OpStdin:
		a.childStdin(f.ID, f.Data, f.Close)
		return nil
	case proto.OpKill:
		a.killChild(f.ID)
		return nil
	case proto.OpConnOpen, proto.OpConnData, proto.OpConnAck, proto.OpConnClose:
		return a.handleTunnel(f)
	}
	return fmt.Errorf("unknown request %q", f.Op)
}

// send writes one frame to the daemon. A failed write means the daemon is gone: the agent exits.
func (a *agent) send(f *proto.Frame) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	if err := proto.Write(a.out, f); err != nil {
		log.Printf("writing to the daemon: %v; exiting", err)
		a.killAll()
		os.Exit(1)
	}
	return nil
}

func (a *agent) answer(id uint64, err error) error {
	if err == nil {
		return a.send(&proto.Frame{Op: proto.OpOK, ID: id})
	}
	var pe *proto.Error
	if errors.As(err, &pe) {
		return a.send(&proto.Frame{Op: proto.OpError, ID: id, Error: pe})
	}
	return a.fail(id, sandbox.KindInvalidRequest, err.Error())
}

func (a *agent) fail(id uint64, kind sandbox.Kind, msg string) error {
	return a.send(&proto.Frame{Op: proto.OpError, ID: id, Error: &proto.Error{Kind: kind, Message: msg}})
}

// killAll kills the Python process group, for the agent's exit.
func (a *agent) killAll() {
	a.mu.Lock()
	py := a.py
	a.mu.Unlock()
	if py != nil {
		py.kill()
	}
	a.dropAllSnaps("the guest is ending")
	a.fileWatch().close()
	// As the sandbox's init, also end what the code started in sessions of its own. (Outside a
	// sandbox, in tests, kill(-1) would hit the whole host: only init may do it.)
	if os.Getpid() == 1 {
		_ = syscall.Kill(-1, syscall.SIGKILL)
	}
}

// cleanAbs checks a path from the daemon: absolute, clean, not the root.
func cleanAbs(p string) (string, error) {
	if p == "" || !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
		return "", &proto.Error{Kind: sandbox.KindInvalidRequest, Message: fmt.Sprintf("path %q must be absolute and clean", p)}
	}
	return p, nil
}

// now is time.Now; a variable so tests can see elapsed times without sleeping.
var now = time.Now
