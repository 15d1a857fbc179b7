// Package runtimetest is the conformance suite every sandbox.Runtime passes, so the tiers keep the
// same promises: output and exceptions come back right, limits end runs with their typed errors,
// nothing survives from one run to the next, sessions keep state and only their own, and the host
// is out of reach. Sub-suites hold each optional ability to its contract (SessionFiles, Catalog,
// Health, Explainer) and the tier to what its Capabilities state; each runs for every runtime
// that has the ability and skips, naming it, for one that has not.
//
// The package also has Fake, the one runtime fake for the tests of the code around runtimes.
package runtimetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Options tell the suite what the runtime under test claims to do.
type Options struct {
	// Deterministic: the runtime honours RunRequest.Deterministic.
	Deterministic bool
	// TimeoutSlack is how far past its deadline a stopped run may return. Default 100ms, the
	// product's promise.
	TimeoutSlack time.Duration
	// NoInterpreter: the runtime runs no Python (a Fake). The cases that run code and read what
	// it did skip, saying so; what is left holds the runtime to its abilities and Capabilities.
	NoInterpreter bool
}

// Run runs the suite against the runtime newRuntime returns. The runtime is shared by the
// subtests and closed at the end: Health goes first, on the fresh runtime, and last, once the
// runtime is closed.
func Run(t *testing.T, newRuntime func(t *testing.T) sandbox.Runtime, opts Options) {
	if opts.TimeoutSlack == 0 {
		opts.TimeoutSlack = 100 * time.Millisecond
	}
	// A canary in the daemon's environment, set before the runtime starts anything: it must not
	// reach any sandbox.
	t.Setenv(canaryEnv, "daemon-secret")
	rt := newRuntime(t)
	s := &suite{rt: rt, opts: opts}
	t.Cleanup(func() {
		if !s.closed {
			_ = rt.Close()
		}
	})
	t.Run("Health", s.health)
	for _, c := range []struct {
		name string
		f    func(t *testing.T)
	}{
		{"Output", s.output},
		{"Exception", s.exception},
		{"ExitCode", s.exitCode},
		{"Env", s.env},
		{"FreshPerRun", s.freshPerRun},
		{"Files", s.files},
		{"OutputTruncated", s.outputTruncated},
		{"TimeoutSpin", s.timeout("while True:\n    pass\n")},
		{"TimeoutSleep", s.timeout("import time\ntime.sleep(60)\n")},
		{"NoStdin", s.noStdin},
		{"AfterTimeout", s.output},
		{"MemoryLimit", s.memory},
		{"NoHostFiles", s.noHostFiles},
		{"NoNetwork", s.noNetwork},
		{"Sessions", s.sessions},
		{"Concurrent", s.concurrent},
	} {
		t.Run(c.name, s.python(c.f))
	}
	if opts.Deterministic {
		t.Run("Deterministic", s.python(s.deterministic))
	}
	t.Run("Capabilities", s.capabilities)
	t.Run("SessionFiles", s.sessionFiles)
	t.Run("Catalog", s.catalog)
	t.Run("Explainer", s.explainer)
	t.Run("HealthAfterClose", s.healthAfterClose)
}

// python marks a case that runs Python and reads what it did: it skips for a runtime without an
// interpreter.
func (s *suite) python(f func(t *testing.T)) func(t *testing.T) {
	return func(t *testing.T) {
		if s.opts.NoInterpreter {
			t.Skip("runs Python code; the runtime has no interpreter (Options.NoInterpreter)")
		}
		f(t)
	}
}

type suite struct {
	rt     sandbox.Runtime
	opts   Options
	closed bool // by HealthAfterClose
}

func (s *suite) req(t *testing.T, code string) *sandbox.RunRequest {
	t.Helper()
	l, err := sandbox.DefaultPolicy().Apply(sandbox.Limits{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &sandbox.RunRequest{Code: code, Tier: s.rt.Capabilities().Tier, Limits: l}
}

func (s *suite) run(t *testing.T, req *sandbox.RunRequest) *sandbox.Result {
	t.Helper()
	res, err := s.rt.Run(context.Background(), req)
	if err != nil {
		t.Fatalf("run %q: %v", req.Code, err)
	}
	if res.Runtime != s.rt.Capabilities().Tier {
		t.Errorf("result says runtime %q, want %q", res.Runtime, s.rt.Capabilities().Tier)
	}
	return res
}

func (s *suite) output(t *testing.T) {
	res := s.run(t, s.req(t, "import sys\nprint('hello', 6*7)\nprint('oops', file=sys.stderr)\n"))
	if res.Stdout != "hello 42\n" || res.Stderr != "oops\n" || res.ExitCode != 0 || res.Error != nil {
		t.Fatalf("got stdout %q stderr %q exit %d error %+v", res.Stdout, res.Stderr, res.ExitCode, res.Error)
	}
}

func (s *suite) exception(t *testing.T) {
	res := s.run(t, s.req(t, "print('before')\ndef f():\n    raise ValueError('boom')\nf()\n"))
	if res.Stdout != "before\n" {
		t.Errorf("stdout %q, want the output printed before the exception", res.Stdout)
	}
	if res.ExitCode != 1 || res.Error == nil {
		t.Fatalf("exit %d error %+v, want exit 1 and the exception", res.ExitCode, res.Error)
	}
	e := res.Error
	if e.Name != "ValueError" || e.Value != "boom" {
		t.Errorf("exception %s: %s, want ValueError: boom", e.Name, e.Value)
	}
	for _, want := range []string{"Traceback (most recent call last)", "line 4", "line 3", "ValueError: boom"} {
		if !strings.Contains(e.Traceback, want) {
			t.Errorf("traceback lacks %q:\n%s", want, e.Traceback)
		}
	}
	if strings.Count(e.Traceback, "File ") != 2 {
		t.Errorf("traceback should show the user's two frames only:\n%s", e.Traceback)
	}
	res = s.run(t, s.req(t, "x = (\n"))
	if res.Error == nil || res.Error.Name != "SyntaxError" {
		t.Errorf("a syntax error gives %+v, want a SyntaxError", res.Error)
	}
}

func (s *suite) exitCode(t *testing.T) {
	for code, want := range map[string]int{
		"import sys\nsys.exit(3)\n":    3,
		"import sys\nsys.exit(0)\n":    0,
		"raise SystemExit('bye')\n":    1,
		"print('done')\n":              0,
		"raise KeyboardInterrupt()\n":  1,
		"import sys\nsys.exit(None)\n": 0,
	} {
		res := s.run(t, s.req(t, code))
		if res.ExitCode != want {
			t.Errorf("%q: exit code %d, want %d", code, res.ExitCode, want)
		}
		if want != 1 && res.Error != nil {
			t.Errorf("%q: SystemExit reported as an error: %+v", code, res.Error)
		}
	}
}

const canaryEnv = "AGENTBOX_TEST_DAEMON_CANARY"

func (s *suite) env(t *testing.T) {
	req := s.req(t, fmt.Sprintf("import os\nprint(os.environ.get('GREETING'), os.environ.get(%q))\n", canaryEnv))
	req.Env = map[string]string{"GREETING": "hello"}
	if res := s.run(t, req); res.Stdout != "hello None\n" {
		t.Fatalf("environment in the sandbox: %q, want the request's GREETING and not the daemon's canary", res.Stdout)
	}
}

func (s *suite) freshPerRun(t *testing.T) {
	s.run(t, s.req(t, "secret = 41\nimport json\njson.secret = 1\nopen('left.txt', 'w').write('x')\n"))
	res := s.run(t, s.req(t, "import os, json\nprint('secret' in globals(), hasattr(json, 'secret'), os.path.exists('left.txt'))\n"))
	if res.Stdout != "False False False\n" {
		t.Fatalf("a later run saw an earlier run's state: %q", res.Stdout)
	}
}

func (s *suite) files(t *testing.T) {
	req := s.req(t, `import os
print(os.getcwd())
print(open('data.txt').read())
print(open('/home/user/sub/b.bin', 'rb').read())
os.makedirs('out', exist_ok=True)
open('out/result.csv', 'w').write('a,b\n1,2\n')
`)
	req.Files = []sandbox.File{{Path: "data.txt", Content: []byte("hello file")}, {Path: "/home/user/sub/b.bin", Content: []byte{0, 1, 2}}}
	res := s.run(t, req)
	if res.Error != nil {
		t.Fatalf("error: %+v", res.Error)
	}
	if want := "/home/user\nhello file\nb'\\x00\\x01\\x02'\n"; res.Stdout != want {
		t.Errorf("stdout %q, want %q", res.Stdout, want)
	}
	var found bool
	for _, f := range res.Files {
		if f.Path == "/home/user/out/result.csv" {
			found = string(f.Content) == "a,b\n1,2\n"
		}
		if f.Path == "/home/user/data.txt" {
			t.Errorf("an unchanged input file came back as an output")
		}
	}
	if !found {
		t.Errorf("written file not returned; files: %v", names(res.Files))
	}
}

func names(fs []sandbox.File) []string {
	var n []string
	for _, f := range fs {
		n = append(n, f.Path)
	}
	return n
}

func (s *suite) outputTruncated(t *testing.T) {
	req := s.req(t, "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(100):\n    sys.stdout.write(chunk)\nprint('end', file=sys.stderr)\n")
	req.Limits.StdoutBytes = 1 << 20
	res := s.run(t, req)
	if !res.StdoutTruncated || len(res.Stdout) != 1<<20 {
		t.Fatalf("100 MB of output gave %d bytes, truncated=%v; want exactly the 1 MiB cap, flagged", len(res.Stdout), res.StdoutTruncated)
	}
	if res.StderrTruncated || res.Stderr != "end\n" {
		t.Errorf("stderr %q truncated=%v: the code should run to its end", res.Stderr, res.StderrTruncated)
	}
}

func (s *suite) timeout(code string) func(t *testing.T) {
	return func(t *testing.T) {
		req := s.req(t, code)
		req.Limits.Timeout = time.Second
		start := time.Now()
		_, err := s.rt.Run(context.Background(), req)
		took := time.Since(start)
		if !errors.Is(err, sandbox.ErrTimeout) {
			t.Fatalf("got %v, want a timeout error", err)
		}
		if took > req.Limits.Timeout+s.opts.TimeoutSlack {
			t.Errorf("stopped after %v, want within %v of the %v deadline", took, s.opts.TimeoutSlack, req.Limits.Timeout)
		}
		e := sandbox.AsError(err)
		if e.Hint == "" {
			t.Errorf("timeout error has no hint: %v", e)
		}
		if e.Result != nil && e.Result.Runtime != s.rt.Capabilities().Tier {
			t.Errorf("the timeout's partial result says runtime %q, want %q", e.Result.Runtime, s.rt.Capabilities().Tier)
		}
	}
}

func (s *suite) memory(t *testing.T) {
	// One huge allocation: refused inside the guest. A 32-bit guest (nano) cannot even express the
	// size and says OverflowError; a 64-bit one says MemoryError or is stopped at its cap.
	s.memoryHog(t, "x = 'a' * 10**10\nprint(len(x))\n", "MemoryError", "OverflowError")
	// Memory that grows in steps up to the cap.
	s.memoryHog(t, "keep = []\nwhile True:\n    keep.append(bytearray(8 << 20))\n", "MemoryError")
	s.output(t)
}

func (s *suite) memoryHog(t *testing.T, code string, names ...string) {
	t.Helper()
	req := s.req(t, code)
	req.Limits.MemoryBytes = 128 << 20
	res, err := s.rt.Run(context.Background(), req)
	switch {
	case errors.Is(err, sandbox.ErrMemoryLimit):
		return
	case err != nil:
		t.Fatalf("%q: got %v, want %v or a memory_limit error", code, err, names)
	case res.Error == nil:
		t.Fatalf("%q: ran to the end past a 128 MiB cap: %+v", code, res)
	}
	for _, n := range names {
		if res.Error.Name == n {
			return
		}
	}
	t.Fatalf("%q: raised %s: %s, want one of %v or a memory_limit error", code, res.Error.Name, res.Error.Value, names)
}

func (s *suite) noHostFiles(t *testing.T) {
	token := randHex()
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	if err := os.WriteFile(path, []byte(token), 0o644); err != nil {
		t.Fatal(err)
	}
	res := s.run(t, s.req(t, fmt.Sprintf(`
try:
    print(open(%q).read())
except OSError as e:
    print('refused', type(e).__name__)
`, path)))
	if strings.Contains(res.Stdout, token) || !strings.HasPrefix(res.Stdout, "refused") {
		t.Fatalf("the sandbox read a host file: %q", res.Stdout)
	}
}

// noStdin: the code has no stdin. input() raises EOFError and sys.stdin.read() returns "" at
// once, as in a script run with stdin closed, instead of waiting for the deadline.
func (s *suite) noStdin(t *testing.T) {
	req := s.req(t, "import sys\nprint(repr(sys.stdin.read()))\ninput('name? ')\n")
	req.Limits.Timeout = 20 * time.Second
	start := time.Now()
	res := s.run(t, req)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("input() took %v: it waited instead of meeting EOF", took)
	}
	if res.Error == nil || res.Error.Name != "EOFError" || res.Stdout != "''\nname? " {
		t.Errorf("stdout %q, error %+v; want '' printed and EOFError", res.Stdout, res.Error)
	}
}

func (s *suite) noNetwork(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	res := s.run(t, s.req(t, fmt.Sprintf(`
import socket
try:
    socket.create_connection(('127.0.0.1', %d), timeout=2)
    print('connected')
except Exception as e:
    print('refused', type(e).__name__)
`, port)))
	if !strings.HasPrefix(res.Stdout, "refused") {
		t.Fatalf("a socket to a host listener: %q", res.Stdout)
	}
	select {
	case <-accepted:
		t.Fatal("the host listener accepted a connection from the sandbox")
	case <-time.After(50 * time.Millisecond):
	}
}

func (s *suite) sessions(t *testing.T) {
	if !s.rt.Capabilities().Sessions {
		t.Skip("the tier states no Sessions (Capabilities.Sessions); the Capabilities case checks NewSession refuses")
	}
	ctx := context.Background()
	l, _ := sandbox.DefaultPolicy().Apply(sandbox.Limits{})
	a, err := s.rt.NewSession(ctx, sandbox.SessionOptions{Tier: s.rt.Capabilities().Tier, Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := s.rt.NewSession(ctx, sandbox.SessionOptions{Tier: s.rt.Capabilities().Tier, Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mustRun := func(sess sandbox.Session, code string) string {
		t.Helper()
		res, err := sess.Run(ctx, s.req(t, code))
		if err != nil {
			t.Fatalf("%q: %v", code, err)
		}
		if res.Error != nil {
			t.Fatalf("%q: %s: %s\n%s", code, res.Error.Name, res.Error.Value, res.Error.Traceback)
		}
		return res.Stdout
	}
	mustRun(a, "import json\ncounter = 1\nopen('state.txt', 'w').write('kept')\n")
	mustRun(a, "counter += 1\n")
	if got := mustRun(a, "print(counter, json.dumps([1]), open('state.txt').read())\n"); got != "2 [1] kept\n" {
		t.Errorf("session state across runs: %q", got)
	}
	if got := mustRun(b, "import os\nprint('counter' in globals(), os.path.exists('state.txt'))\n"); got != "False False\n" {
		t.Errorf("session B saw session A's state: %q", got)
	}
	res, err := a.Run(ctx, s.req(t, "raise RuntimeError('in session')\n"))
	if err != nil || res.Error == nil || res.Error.Name != "RuntimeError" {
		t.Errorf("exception in a session: %+v %v", res, err)
	}
	if got := mustRun(a, "print(counter)\n"); got != "2\n" {
		t.Errorf("an exception lost the session's state: %q", got)
	}
	if err := a.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if _, err := a.Run(ctx, s.req(t, "print(1)\n")); err == nil {
		t.Errorf("a closed session still runs code")
	}
}

func (s *suite) concurrent(t *testing.T) {
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := s.rt.Run(context.Background(), s.req(t, fmt.Sprintf("print(%d * 2)\n", i)))
			if err != nil {
				errs <- err
				return
			}
			if want := fmt.Sprintf("%d\n", i*2); res.Stdout != want {
				errs <- fmt.Errorf("run %d: stdout %q, want %q", i, res.Stdout, want)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func (s *suite) deterministic(t *testing.T) {
	code := "import random, time, os\nprint(random.random(), time.time(), os.urandom(4).hex())\n"
	var outs []string
	for i := 0; i < 2; i++ {
		req := s.req(t, code)
		req.Deterministic = &sandbox.Determinism{Time: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), Seed: 7}
		outs = append(outs, s.run(t, req).Stdout)
	}
	if outs[0] != outs[1] {
		t.Errorf("two deterministic runs differ: %q vs %q", outs[0], outs[1])
	}
	if !strings.Contains(outs[0], "1704164645") {
		t.Errorf("time.time() does not read the fixed clock: %q", outs[0])
	}
	real := s.run(t, s.req(t, code)).Stdout
	if real == outs[0] {
		t.Errorf("a run without determinism read the fixed values")
	}
}

func randHex() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
