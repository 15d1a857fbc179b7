package jail_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/jail"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

func TestNoNetwork(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	r := runJail(t, testSpec(), "net", ln.Addr().String())
	mustSucceed(t, r)
	expect(t, r, map[string]string{
		"interfaces":    "lo",
		"dial":          "ENETUNREACH",
		"dial-internet": "ENETUNREACH",
	})
	if n := accepted.Load(); n != 0 {
		t.Errorf("host listener accepted %d connections from the jail", n)
	}
}

func TestNoHostFiles(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	host := t.TempDir()
	secret := filepath.Join(host, "secrets", "api_key")
	if err := os.MkdirAll(filepath.Dir(secret), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("sk-do-not-leak"), 0o600); err != nil {
		t.Fatal(err)
	}
	artifact := filepath.Join(host, "python.wasm")
	// World-writable on the host: only the read-only bind stops writes.
	if err := os.WriteFile(artifact, []byte("\x00asm-artifact"), 0o666); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(host, "cache")
	if err := os.Mkdir(cache, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cache, "entry"), []byte("compiled"), 0o666); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{artifact, cache, filepath.Join(cache, "entry")} {
		if err := os.Chmod(p, 0o777); err != nil { // past the umask
			t.Fatal(err)
		}
	}

	spec := testSpec()
	spec.Binds = []jail.Bind{
		{Source: artifact, Target: "/artifacts/python.wasm"},
		{Source: cache, Target: "/artifacts/cache"},
	}
	// The secret's host path, asked for verbatim inside the jail.
	r := runJail(t, spec, "files", secret, "/artifacts/python.wasm", "/artifacts/cache")
	mustSucceed(t, r)
	expect(t, r, map[string]string{
		"passwd":         "ENOENT",
		"secret":         "ENOENT",
		"secret-dir":     "ENOENT",
		"proc":           "ENOENT",
		"root-write":     "EROFS",
		"root-mkdir":     "EROFS",
		"artifact":       `"\x00asm-artifact" nil`,
		"artifact-write": "EROFS",
		"artifact-chmod": "EROFS",
		"dir-read":       `"compiled" nil`,
		"dir-create":     "EROFS",
		"dir-remove":     "EROFS",
	})
	if strings.Contains(r.stdout, "sk-do-not-leak") {
		t.Error("the secret leaked into the jail")
	}
	// The root holds the binds and, for a binary built with cgo, the
	// dynamic loader's files under /lib64 or /usr/lib, /lib.
	root, _, _ := strings.Cut(r.kv["root"], " ")
	for _, name := range strings.Split(root, ",") {
		switch name {
		case "artifacts", "lib", "lib64", "usr":
		default:
			t.Errorf("unexpected %q in the jail's root %q", name, root)
		}
	}
}

func TestRestrictiveUmask(t *testing.T) {
	testenv.RequireRoot(t)
	// Not parallel: the umask is per process.
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	artifact := filepath.Join(t.TempDir(), "stdlib.zip")
	writeFile(t, artifact, []byte("zip"), 0o644)
	spec := testSpec()
	spec.Binds = []jail.Bind{{Source: artifact, Target: "/deep/er/stdlib.zip"}}
	r := runJail(t, spec, "open-after", "/deep/er/stdlib.zip")
	mustSucceed(t, r)
	expect(t, r, map[string]string{"open": "3 nil true"})
}

func TestUnprivileged(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	spec := testSpec()
	spec.Hostname = "probe-host"
	r := runJail(t, spec, "ids")
	mustSucceed(t, r)
	u := fmt.Sprint(spec.UID)
	g := fmt.Sprint(spec.GID)
	expect(t, r, map[string]string{
		"uid":      u + " " + u + " " + u,
		"gid":      g + " " + g + " " + g,
		"groups":   "[]",
		"pid":      "1",
		"hostname": "probe-host",
		"caps":     "eff=00 prm=00 inh=00 nil",
		"bounding": "[]",
		"nnp":      "1",
		"setuid0":  "EPERM",
		"mount":    "EPERM",
		"chroot":   "EPERM",
		"nproc":    "256",
		"core":     "0",
	})
}

func TestFileDescriptors(t *testing.T) {
	testenv.RequireRoot(t)
	// Not parallel: the leaked directory fd below would reach every jail
	// started meanwhile (and be closed there too, which is the point).
	leak, err := syscall.Open("/", syscall.O_RDONLY|syscall.O_DIRECTORY, 0) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(leak)

	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	fmt.Fprintln(inW, "hello")
	inW.Close()

	spec := testSpec()
	spec.ExtraFiles = []*os.File{inR, outW}
	var echoed []byte
	done := make(chan struct{})
	go func() { echoed, _ = io.ReadAll(outR); close(done) }()
	r := runJail(t, spec, "fds", "echo")
	<-done
	mustSucceed(t, r)
	expect(t, r, map[string]string{
		"open":    "0,1,2,3,4",
		"escaped": "no",
	})
	if string(echoed) != "echo hello\n" {
		t.Errorf("fd 4 carried %q, want %q", echoed, "echo hello\n")
	}
}

func TestDirectoryFDRefused(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	dir, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	spec := testSpec()
	spec.ExtraFiles = []*os.File{dir}
	if _, err := jail.Command(spec, probeArg, "ready"); !errors.Is(err, jail.ErrInvalidSpec) {
		t.Fatalf("Command with a directory in ExtraFiles: %v, want ErrInvalidSpec", err)
	}

	// Slipped in behind Command's back, it is closed before the worker runs.
	cmd, err := jail.Command(testSpec(), probeArg, "fds")
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.ExtraFiles = []*os.File{dir}
	if err := cmd.Run(); err != nil {
		t.Fatalf("Run: %v; stderr %s", err, stderr.String())
	}
	expect(t, result{kv: parse(stdout.String()), stdout: stdout.String()}, map[string]string{
		"open":    "0,1,2",
		"escaped": "no",
	})
}

func TestInitOutsideJail(t *testing.T) {
	t.Parallel()
	cmd, err := jail.Command(testSpec(), probeArg, "ready")
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = nil
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != jail.InitFailedExitCode || !bytes.Contains(out, []byte("not PID 1")) {
		t.Fatalf("init outside a PID namespace: %v, %s", err, out)
	}
}

func TestEnvironment(t *testing.T) {
	testenv.RequireRoot(t)
	t.Setenv("AGENTBOX_API_KEY", "sk-daemon-secret")
	spec := testSpec()
	spec.Env = []string{"GOMAXPROCS=1"}
	r := runJail(t, spec, "env")
	mustSucceed(t, r)
	// A binary built with cgo also gets LD_LIBRARY_PATH for its libraries.
	var env []string
	for _, kv := range strings.Fields(r.kv["env"]) {
		if !strings.HasPrefix(kv, "LD_LIBRARY_PATH=") {
			env = append(env, kv)
		}
	}
	r.kv["env"] = strings.Join(env, " ")
	expect(t, r, map[string]string{
		"env":        "HOME=/ GOMAXPROCS=1",
		"args":       jail.WorkerArgv0 + " " + probeArg + " env",
		"gomaxprocs": "1",
		"cwd":        "/",
	})
}

// TestProcSelf: a worker given Spec.ProcSelf sees only its own process in it (no /proc/sys, no
// kernel files), takes its /proc/self/pagemap, holds no directory after, and tracks written
// pages with it under the seccomp filter that allows the tracker's ioctls only. Without
// ProcSelf it gets nothing.
func TestProcSelf(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	r := runJail(t, testSpec(), "procself")
	mustSucceed(t, r)
	expect(t, r, map[string]string{"procfd": "none"})

	spec := testSpec()
	spec.ProcSelf = true
	r = runJail(t, spec, "procself")
	mustSucceed(t, r)
	expect(t, r, map[string]string{
		"entries":  "1,self,thread-self",
		"pagemap":  "ok",
		"dirs":     "none",
		"again":    "0",
		"tracking": "[2 1]",
	})
}
