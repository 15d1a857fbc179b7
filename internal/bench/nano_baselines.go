package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// DefaultPython is the native interpreter of the baselines: the system's /usr/bin/python3 where
// there is one, else python3 from PATH. The system interpreter is what a bubblewrap jail would
// usually run, it is built from the same Debian CPython source as setup's optimised nano build,
// and it carries no development environment: a pyenv interpreter with third-party packages can
// spend more time importing .pth hooks at start than CPython itself needs.
func DefaultPython() string {
	if fi, err := os.Stat("/usr/bin/python3"); err == nil && !fi.IsDir() {
		return "/usr/bin/python3"
	}
	return "python3"
}

// python is the native interpreter of the baselines.
type python struct {
	// Exe is the interpreter binary itself (sys.executable), not a launcher such as a pyenv shim,
	// which would add a shell script's start to every run.
	Exe     string
	Version string
	// Prefixes are sys.prefix and sys.base_prefix: what bubblewrap must show the interpreter.
	Prefixes []string
}

// findPython resolves name (e.g. "python3" from PATH) to the interpreter binary it runs.
func findPython(ctx context.Context, name string) (python, error) {
	out, err := exec.CommandContext(ctx, name, "-c",
		"import sys; print(sys.executable); print(sys.version.split()[0]); print(sys.prefix); print(sys.base_prefix)").Output()
	if err != nil {
		return python{}, fmt.Errorf("native python %q: %w", name, err)
	}
	f := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(f) != 4 || f[0] == "" {
		return python{}, fmt.Errorf("native python %q: unexpected answer %q", name, out)
	}
	p := python{Exe: f[0], Version: f[1]}
	for _, pre := range f[2:] {
		if pre != "" && (len(p.Prefixes) == 0 || p.Prefixes[0] != pre) {
			p.Prefixes = append(p.Prefixes, pre)
		}
	}
	return p, nil
}

// argv runs code natively.
func (p python) argv(code string) []string { return []string{p.Exe, "-c", code} }

// bwrapArgv runs code under bubblewrap: new user, PID, network, IPC, UTS and cgroup namespaces,
// every capability dropped, a fresh session, an empty root with only /usr, the /bin and /lib
// links or directories and the interpreter's prefixes read-only, a private /proc, /dev and /tmp,
// and a cleared environment. That is about what a careful person would use to sandbox a script
// with bwrap, and what its start costs.
func (p python) bwrapArgv(bwrap, code string) []string {
	a := []string{bwrap,
		"--unshare-all", "--cap-drop", "ALL", "--die-with-parent", "--new-session",
		"--clearenv", "--setenv", "PATH", "/usr/bin:/bin",
		"--ro-bind", "/usr", "/usr",
	}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if t, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", t, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	for _, pre := range p.Prefixes {
		if pre != "/usr" && !strings.HasPrefix(pre, "/usr/") {
			a = append(a, "--ro-bind", pre, pre)
		}
	}
	if dir := filepath.Dir(p.Exe); !strings.HasPrefix(dir, "/usr/") && !underAny(dir, p.Prefixes) {
		a = append(a, "--ro-bind", dir, dir)
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/tmp")
	return append(a, p.argv(code)...)
}

func underAny(dir string, prefixes []string) bool {
	for _, p := range prefixes {
		if dir == p || strings.HasPrefix(dir, p+"/") {
			return true
		}
	}
	return false
}

// processEnv is the environment of native runs: the same minimal one bubblewrap sets.
var processEnv = []string{"PATH=/usr/bin:/bin"}

// runProcess runs argv and returns its stdout and the wall time from start to exit.
func runProcess(ctx context.Context, argv []string) (string, time.Duration, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = processEnv
	return timedRun(cmd, filepath.Base(argv[0]))
}

// helloCall runs argv and checks it printed "hi".
func helloCall(argv []string) call {
	return func(ctx context.Context) (time.Duration, error) {
		out, d, err := runProcess(ctx, argv)
		if err != nil {
			return 0, err
		}
		if out != "hi\n" {
			return 0, fmt.Errorf("%s printed %q, want \"hi\\n\"", filepath.Base(argv[0]), out)
		}
		return d, nil
	}
}

// baselines measures the process baselines: native python3 and python3 under bubblewrap, each
// one client sequentially and then from opts.Concurrency clients at once, and, unless NoDensity,
// opts.IdleSessions idle interpreters of each (idleBaseline).
func (b *nanoBencher) baselines(ctx context.Context) {
	py := b.py
	if py.Exe == "" {
		b.fail(groupLatency, keyNative, "python3 -c (native)", b.pyErr)
		b.failDensity(keyNative, rowDensityPy, b.pyErr)
		return
	}
	native := py.argv(helloCode)
	b.progress("native: %s -c 'print(\"hi\")', %d runs", py.Exe, b.opts.N)
	b.latency(ctx, keyNative, "python3 -c (native)", fmt.Sprintf("python %s, process start to exit", py.Version), helloCall(native))
	b.throughput(ctx, keyNative, "python3 -c (native)", "", helloCall(native))
	b.idleBaseline(ctx, keyNative, rowDensityPy, py.argv(replLoop))

	bwrap, note, err := ensureBwrap(ctx, b.log)
	if note != "" {
		b.note("%s", note)
	}
	if err != nil {
		b.fail(groupLatency, keyBwrap, "python3 -c under bwrap", err)
		b.fail(groupThroughput, keyBwrap, "python3 -c under bwrap", err)
		b.failDensity(keyBwrap, rowDensityBwrap, err)
		return
	}
	argv := py.bwrapArgv(bwrap, helloCode)
	b.note("bwrap baseline: `%s`", shellJoin(argv))
	b.progress("bubblewrap: %d runs", b.opts.N)
	b.latency(ctx, keyBwrap, "python3 -c under bwrap", "same interpreter, namespaces + empty root", helloCall(argv))
	b.throughput(ctx, keyBwrap, "python3 -c under bwrap", "", helloCall(argv))
	b.idleBaseline(ctx, keyBwrap, rowDensityBwrap, py.bwrapArgv(bwrap, replLoop))
}

// idleBaseline is the density scenario for interpreters started the way the latency baselines
// are (argv runs replLoop, natively or under bubblewrap): opts.IdleSessions processes, each
// having run the density cell, idle; their PSS is read over the bench and its children.
func (b *nanoBencher) idleBaseline(ctx context.Context, key, name string, argv []string) {
	if b.opts.NoDensity {
		return
	}
	d := measureIdle(ctx, idleSpec{
		Name: name, Key: key, K: b.opts.IdleSessions, Clients: b.opts.Concurrency,
		Detail: "one python3 process per session (plus bubblewrap's own processes, under bwrap) reading cells on stdin (a REPL over a pipe), started like the latency baselines; PSS of the bench and the processes it started",
		Open: func(ctx context.Context) (targetSession, error) {
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = processEnv
			return startREPL(cmd)
		},
		Memory: selfMemory, Progress: b.progress,
	})
	b.res.Density = append(b.res.Density, d)
}

func (b *nanoBencher) failDensity(key, name string, err error) {
	if !b.opts.NoDensity {
		b.res.Density = append(b.res.Density, Density{Key: key, Name: name, Asked: b.opts.IdleSessions, Error: err.Error()})
	}
}

// shellJoin quotes argv for a person to paste into a shell.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r == '/' || r == '-' || r == '.' || r == '_' || r == ':' || r == '=' ||
				r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		}) < 0 {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
