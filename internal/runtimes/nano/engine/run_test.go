package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

func TestOutputAndException(t *testing.T) {
	res := run(t, `import sys
print("out")
print("err", file=sys.stderr)

def f():
    raise ValueError("bad value")

f()
`)
	if res.Stdout != "out\n" {
		t.Errorf("stdout = %q", res.Stdout)
	}
	if res.ExitCode != 1 {
		t.Errorf("exit code = %d, want 1", res.ExitCode)
	}
	e := res.Error
	if e == nil || e.Name != "ValueError" || e.Value != "bad value" {
		t.Fatalf("error = %+v", e)
	}
	want := `Traceback (most recent call last):
  File "<string>", line 8, in <module>
  File "<string>", line 6, in f
ValueError: bad value
`
	if got := dropSourceLines(e.Traceback); got != want {
		t.Errorf("traceback:\n%s\nwant (source lines aside):\n%s", e.Traceback, want)
	}
	if !strings.Contains(e.Traceback, `    raise ValueError("bad value")`) {
		t.Errorf("traceback lacks the user's line:\n%s", e.Traceback)
	}
	if strings.Contains(e.Traceback, "agentbox") {
		t.Errorf("traceback shows the driver:\n%s", e.Traceback)
	}
	if !strings.HasPrefix(res.Stderr, "err\n") || !strings.HasSuffix(res.Stderr, e.Traceback) {
		t.Errorf("stderr = %q", res.Stderr)
	}
}

// dropSourceLines removes the source lines (and 3.11+ carets) CPython puts under each frame.
func dropSourceLines(tb string) string {
	var out []string
	for _, l := range strings.Split(tb, "\n") {
		if strings.HasPrefix(l, "    ") {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

func TestSyntaxError(t *testing.T) {
	res := run(t, "x = (1,\n")
	if res.ExitCode != 1 || res.Error == nil || res.Error.Name != "SyntaxError" {
		t.Fatalf("result = %+v", res)
	}
	if !strings.Contains(res.Error.Traceback, `File "<string>", line 1`) || strings.Contains(res.Error.Traceback, "Traceback") {
		t.Errorf("traceback = %q", res.Error.Traceback)
	}
}

func TestExitCodes(t *testing.T) {
	inst := newInstance(t) // one instance: SystemExit does not end the interpreter
	for _, tc := range []struct {
		name, code string
		exit       int
		stderr     string
		err        string
	}{
		{"normal", "x = 1", 0, "", ""},
		{"sys.exit(3)", "import sys; sys.exit(3)", 3, "", ""},
		{"sys.exit()", "import sys; sys.exit()", 0, "", ""},
		{"sys.exit(None)", "raise SystemExit(None)", 0, "", ""},
		{"sys.exit(msg)", "import sys; sys.exit('bye')", 1, "bye\n", ""},
		{"exit builtin", "exit(5)", 5, "", ""},
		{"exception", "1/0", 1, "", "ZeroDivisionError"},
		{"keyboard interrupt", "raise KeyboardInterrupt", 1, "", "KeyboardInterrupt"},
		{"exit 256", "import sys; sys.exit(256)", 0, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runIn(t, inst, &Request{Code: tc.code})
			if res.ExitCode != tc.exit {
				t.Errorf("exit code = %d, want %d", res.ExitCode, tc.exit)
			}
			if tc.stderr != "" && res.Stderr != tc.stderr {
				t.Errorf("stderr = %q, want %q", res.Stderr, tc.stderr)
			}
			switch {
			case tc.err == "" && res.Error != nil:
				t.Errorf("error = %+v, want none", res.Error)
			case tc.err != "" && (res.Error == nil || res.Error.Name != tc.err):
				t.Errorf("error = %+v, want %s", res.Error, tc.err)
			}
		})
	}
}

func TestFreshGlobalsAndFiles(t *testing.T) {
	a := newInstance(t)
	res := runIn(t, a, &Request{Code: "x = 1\nopen('mine.txt', 'w').write('a')\nimport json; json.answer = 42"})
	if res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	// The same instance without KeepGlobals: fresh globals (the file system stays).
	res = runIn(t, a, &Request{Code: "print('x' in globals(), __name__)"})
	if res.Stdout != "False __main__\n" {
		t.Errorf("same instance, fresh globals: %q", res.Stdout)
	}
	// Another instance: nothing of the first.
	b := newInstance(t)
	res = runIn(t, b, &Request{Code: "import os, json\nprint('x' in globals(), os.path.exists('mine.txt'), hasattr(json, 'answer'), __name__)"})
	if res.Stdout != "False False False __main__\n" {
		t.Errorf("new instance: %q", res.Stdout)
	}
}

func TestSessionKeepsGlobals(t *testing.T) {
	inst := newInstance(t)
	steps := []struct{ code, out string }{
		{"x = 41\nimport os\nos.environ['MINE'] = 'kept'\nopen('f.txt', 'w').write('data')", ""},
		{"x += 1\nprint(x, os.environ['MINE'], open('f.txt').read())", "42 kept data\n"},
		{"def g():\n    return x * 2\nprint(g())", "84\n"},
		{"print(g(), __name__)", "84 __main__\n"},
	}
	for _, s := range steps {
		res := runIn(t, inst, &Request{Code: s.code, KeepGlobals: true})
		if res.ExitCode != 0 || res.Stdout != s.out {
			t.Fatalf("%q: %+v", s.code, res)
		}
	}
	// A traceback of a function defined in an earlier run shows that run's line.
	res := runIn(t, inst, &Request{Code: "def h():\n    raise KeyError('k')\n", KeepGlobals: true})
	res = runIn(t, inst, &Request{Code: "h()", KeepGlobals: true})
	if res.Error == nil || !strings.Contains(res.Error.Traceback, "raise KeyError('k')") {
		t.Errorf("traceback = %+v", res.Error)
	}
}

func TestInputAndOutputFiles(t *testing.T) {
	inst := newInstance(t)
	res := runIn(t, inst, &Request{
		Files: []sandbox.File{
			{Path: "data.txt", Content: []byte("hello")},
			{Path: "sub/dir/keep.txt", Content: []byte("untouched")},
			{Path: "/tmp/abs.bin", Content: []byte{0, 1, 2}},
		},
		Code: `import os
print(os.getcwd(), open('/home/user/data.txt').read(), open('sub/dir/keep.txt').read(), open('/tmp/abs.bin', 'rb').read())
open('data.txt', 'a').write(' world')
os.makedirs('out/nested')
open('out/nested/r.csv', 'w').write('a,b\n')
open('gone.txt', 'w').write('x')
os.remove('gone.txt')
`,
	})
	if res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	if res.Stdout != "/home/user hello untouched b'\\x00\\x01\\x02'\n" {
		t.Errorf("stdout = %q", res.Stdout)
	}
	got := map[string]string{}
	for _, f := range res.Files {
		got[f.Path] = string(f.Content)
	}
	want := map[string]string{"/home/user/data.txt": "hello world", "/home/user/out/nested/r.csv": "a,b\n"}
	if len(got) != len(want) {
		t.Errorf("files = %v, want %v", got, want)
	}
	for p, c := range want {
		if got[p] != c {
			t.Errorf("file %s = %q, want %q (all: %v)", p, got[p], c, got)
		}
	}
}

func TestBadInputFiles(t *testing.T) {
	inst := newInstance(t)
	bad := []string{"../etc/passwd", "a/../../b", "", "/dev/agentbox-ctl", "/dev/x", "/"}
	if inst.e.stdlib != nil {
		bad = append(bad, inst.e.cfg.StdlibGuestPath, "/usr/local/lib")
	}
	for _, p := range bad {
		_, err := inst.Run(context.Background(), &Request{Code: "pass", Files: []sandbox.File{{Path: p, Content: []byte("x")}}})
		if sandbox.KindOf(err) != sandbox.KindInvalidRequest {
			t.Errorf("input file %q: err = %v, want invalid_request", p, err)
		}
	}
	// Too big for the files limit.
	_, err := inst.Run(context.Background(), &Request{Code: "pass", Limits: sandbox.Limits{FilesBytes: 1000},
		Files: []sandbox.File{{Path: "big", Content: make([]byte, 2000)}}})
	if sandbox.KindOf(err) != sandbox.KindInvalidRequest {
		t.Errorf("oversized input: err = %v", err)
	}
	// The instance still works.
	if res := runIn(t, inst, &Request{Code: "print('ok')"}); res.Stdout != "ok\n" {
		t.Errorf("after refusals: %+v", res)
	}
}

func TestFileSystemCap(t *testing.T) {
	inst := newInstance(t)
	res := runIn(t, inst, &Request{Limits: sandbox.Limits{FilesBytes: 1 << 20}, Code: `import errno
try:
    with open('big', 'wb') as f:
        for _ in range(20):
            f.write(b'x' * 100_000)
except OSError as e:
    print(type(e).__name__, e.errno == errno.ENOSPC, e.errno, e.strerror)
import os
print(os.path.getsize('big') <= 1 << 20)
`})
	if !strings.HasPrefix(res.Stdout, "OSError True ") || !strings.HasSuffix(res.Stdout, "\nTrue\n") {
		t.Errorf("stdout = %q (stderr %q)", res.Stdout, res.Stderr)
	}
	t.Logf("ENOSPC as the guest sees it: %s", strings.SplitN(res.Stdout, "\n", 2)[0])
}

func TestFileOperations(t *testing.T) {
	res := run(t, `import os, shutil, pathlib, tempfile
os.makedirs('a/b/c')
pathlib.Path('a/b/c/f.txt').write_text('hello')
shutil.copy('a/b/c/f.txt', 'a/g.txt')
os.rename('a/g.txt', 'a/h.txt')
print(sorted(os.listdir('a')))
print([(d, sorted(fs)) for d, _, fs in os.walk('a')])
with open('a/h.txt', 'r+') as f:
    f.seek(2); f.write('LL'); f.truncate(4)
print(open('a/h.txt').read(), os.stat('a/h.txt').st_size)
os.unlink('a/h.txt')
shutil.rmtree('a')
print(os.path.exists('a'), sorted(p.name for p in pathlib.Path('.').iterdir()))
with tempfile.NamedTemporaryFile('w', delete=False) as t:
    t.write('tmp')
print(t.name.startswith('/tmp/'), open(t.name).read())
try:
    os.rmdir('/home')
except OSError as e:
    print('rmdir', type(e).__name__)
print(sorted(os.listdir('/')))
`)
	want := `['b', 'h.txt']
[('a', ['h.txt']), ('a/b', []), ('a/b/c', ['f.txt'])]
heLL 4
False []
True tmp
rmdir OSError
`
	if !strings.HasPrefix(res.Stdout, want) {
		t.Errorf("stdout:\n%s\nwant prefix:\n%s\nstderr: %s", res.Stdout, want, res.Stderr)
	}
	t.Logf("root: %s", strings.TrimPrefix(res.Stdout, want))
}

func TestNoHostAccess(t *testing.T) {
	res := run(t, `import os
for p in ['/etc/passwd', '../../etc/passwd', '/proc/self/environ', '/dev/agentbox-ctl']:
    try:
        open(p).read()
        print(p, 'READ')
    except OSError as e:
        print(p, type(e).__name__)
import socket
try:
    socket.socket().connect(("127.0.0.1", 80))
    print('socket CONNECTED')
except Exception as e:
    print('socket', type(e).__name__)
import subprocess
try:
    subprocess.run(["ls"])
    print('subprocess RAN')
except Exception as e:
    print('subprocess', type(e).__name__)
print(sorted(os.environ))
`)
	for _, bad := range []string{"READ", "CONNECTED", "RAN"} {
		if strings.Contains(res.Stdout, bad) {
			t.Errorf("escaped:\n%s", res.Stdout)
		}
	}
	if res.ExitCode != 0 || strings.Count(res.Stdout, "\n") != 7 {
		t.Errorf("result: %+v", res)
	}
	t.Log(res.Stdout)
}

func TestEnvironment(t *testing.T) {
	t.Setenv("AGENTBOX_SECRET_OF_THE_WORKER", "leak")
	inst := newInstance(t)
	res := runIn(t, inst, &Request{Env: map[string]string{"MY_VAR": "v1"}, Code: "import os\nprint(os.environ.get('MY_VAR'), os.environ.get('AGENTBOX_SECRET_OF_THE_WORKER'), os.environ['HOME'])"})
	if res.Stdout != "v1 None /home/user\n" {
		t.Errorf("stdout = %q", res.Stdout)
	}
	// A fresh-globals run gets the fixed environment plus its own again.
	res = runIn(t, inst, &Request{Code: "import os\nprint(os.environ.get('MY_VAR'))"})
	if res.Stdout != "None\n" {
		t.Errorf("env of a later run = %q", res.Stdout)
	}
}

func TestSleep(t *testing.T) {
	res := run(t, `import time
t0 = time.monotonic(); w0 = time.time()
time.sleep(0.05)
print(time.monotonic() - t0 >= 0.05, time.time() - w0 >= 0.04)
import select
t0 = time.monotonic()
select.select([], [], [], 0.03)
print(time.monotonic() - t0 >= 0.03)
`)
	if res.Stdout != "True True\nTrue\n" {
		t.Errorf("%+v", res)
	}
	if res.Timing.Execute < 80*time.Millisecond {
		t.Errorf("sleeps took %v", res.Timing.Execute)
	}
}

// TestNoStdin: the code has no stdin, so input() and sys.stdin.read() meet EOF at once, as in
// a script run with stdin closed, instead of waiting for the run's deadline.
func TestNoStdin(t *testing.T) {
	inst := newInstance(t)
	start := time.Now()
	res, err := inst.Run(context.Background(), &Request{
		Code:   "import sys\nprint(repr(sys.stdin.read()))\ninput('name? ')",
		Limits: sandbox.Limits{Timeout: 10 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Name != "EOFError" || res.Stdout != "''\nname? " {
		t.Errorf("%+v %+v", res, res.Error)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("input() took %v: it waited instead of meeting EOF", took)
	}
}

// TestNoNetworkSaysSo: a name lookup, as socket.create_connection and every HTTP client make
// one, fails with socket.gaierror saying that nano has no network and how to ask for it.
func TestNoNetworkSaysSo(t *testing.T) {
	inst := newInstance(t)
	for _, code := range []string{
		"import socket\nsocket.create_connection(('example.com', 80))",
		"import urllib.request\nurllib.request.urlopen('http://example.com/')",
	} {
		res := runIn(t, inst, &Request{Code: code})
		if res.Error == nil || !strings.Contains(res.Error.Traceback, NoNetwork) ||
			(res.Error.Name != "gaierror" && res.Error.Name != "URLError") {
			t.Errorf("%q: %+v", code, res.Error)
		}
	}
	res := runIn(t, inst, &Request{Code: "import socket\ntry:\n    socket.getaddrinfo('example.com', 443)\nexcept socket.gaierror as e:\n    print(e)"})
	if res.Stdout != "[Errno 8] "+NoNetwork+"\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
}

func TestTimeoutWhileBlocked(t *testing.T) {
	for _, tc := range []struct{ name, code string }{
		{"sleep", "print('before', flush=True)\nimport time\ntime.sleep(10)\nprint('after')"},
		// sys.stdin is empty (TestNoStdin); fd 0 itself is the driver's hand-over pipe.
		{"stdin", "print('before')\nimport os\nos.read(0, 1)\nprint('after')"},
		{"stdin buffer", "print('before')\nimport sys\nsys.__stdin__.read()\nprint('after')"},
		{"select", "print('before')\nimport select\nselect.select([0], [], [])\nprint('after')"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst := newInstance(t)
			const timeout = 200 * time.Millisecond
			start := time.Now()
			res, err := inst.Run(context.Background(), &Request{Code: tc.code, Limits: sandbox.Limits{Timeout: timeout}})
			took := time.Since(start)
			if sandbox.KindOf(err) != sandbox.KindTimeout {
				t.Fatalf("err = %v, res = %+v", err, res)
			}
			if took > timeout+100*time.Millisecond {
				t.Errorf("run took %v, deadline %v", took, timeout)
			}
			var e *sandbox.Error
			if !errors.As(err, &e) || e.Result == nil || e.Result.Stdout != "before\n" {
				t.Errorf("partial result: %+v", e.Result)
			}
			if inst.Interruptible() {
				// Interrupted: the interpreter parked again and serves the next run.
				if res := runIn(t, inst, &Request{Code: "print('next')"}); res.Stdout != "next\n" {
					t.Errorf("the run after the interrupted one: %+v", res)
				}
				return
			}
			// A build without the interrupt: the guest stopped by itself.
			select {
			case <-inst.exited:
			case <-time.After(time.Second):
				t.Errorf("the guest did not stop")
			}
			if inst.Alive() {
				t.Errorf("instance still alive after a timeout")
			}
			if _, err := inst.Run(context.Background(), &Request{Code: "pass"}); sandbox.KindOf(err) != sandbox.KindConflict {
				t.Errorf("run on a dead instance: %v", err)
			}
		})
	}
}

// TestTimeoutInterrupts: code still running at its deadline, computing or waiting, is interrupted
// within a few milliseconds; the run returns what it printed, and a session's interpreter lives
// on with the state the code had built until the stop. (Code that swallows the interrupt is left
// computing: see the nano package's TestSessionTimeout, which runs it in a worker process.)
func TestTimeoutInterrupts(t *testing.T) {
	if !newInstance(t).Interruptible() {
		testenv.Skip(t, "this CPython build does not export the SIGINT flags (agentbox setup builds one that does)")
	}
	for _, tc := range []struct{ name, code string }{
		{"loop", "x += 1\nprint('before', flush=True)\nwhile True: pass"},
		{"calls", "x += 1\nprint('before', flush=True)\ndef f(n): return n + 1\nn = 0\nwhile True: n = f(n)"},
		{"sleep", "x += 1\nprint('before', flush=True)\nimport time\ntime.sleep(60)\nprint('after')"},
		// A read of fd 0 itself (sys.stdin is empty: TestNoStdin).
		{"read fd 0", "x += 1\nprint('before', flush=True)\nimport os\nos.read(0, 1)\nprint('after')"},
		{"select", "x += 1\nprint('before', flush=True)\nimport select\nselect.select([0], [], [])\nprint('after')"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst := newInstance(t)
			runIn(t, inst, &Request{Code: "x = 41", KeepGlobals: true})
			const timeout = 300 * time.Millisecond
			start := time.Now()
			_, err := inst.Run(context.Background(), &Request{Code: tc.code, KeepGlobals: true, Limits: sandbox.Limits{Timeout: timeout}})
			took := time.Since(start)
			var e *sandbox.Error
			if !errors.As(err, &e) || e.Kind != sandbox.KindTimeout || !strings.Contains(e.Message, "interrupted") {
				t.Fatalf("err = %v, want a timeout that says the code was interrupted", err)
			}
			if took > timeout+interruptWait {
				t.Errorf("run took %v, deadline %v", took, timeout)
			}
			if e.Result == nil || e.Result.Stdout != "before\n" || e.Result.ExitCode != -1 {
				t.Fatalf("partial result: %+v", e.Result)
			}
			if e.Result.Error == nil || e.Result.Error.Name != "KeyboardInterrupt" || strings.Contains(e.Result.Error.Traceback, "agentbox-driver") {
				t.Errorf("the stop, as the code saw it: %+v", e.Result.Error)
			}
			if !inst.Alive() {
				t.Fatal("the interpreter ended; it should live on after an interrupt")
			}
			res := runIn(t, inst, &Request{Code: "print(x)", KeepGlobals: true})
			if res.Stdout != "42\n" {
				t.Errorf("the state after the stop: %+v", res)
			}
		})
	}
}

func TestOsExitEndsInstance(t *testing.T) {
	inst := newInstance(t)
	res := runIn(t, inst, &Request{Code: "print('bye')\nimport os\nos._exit(7)"})
	if res.ExitCode != 7 || res.Stdout != "bye\n" {
		t.Errorf("%+v", res)
	}
	if inst.Alive() {
		t.Errorf("alive after os._exit")
	}
}

func TestDriverEndsAfterReport(t *testing.T) {
	inst := newInstance(t)
	// Closing fd 0 lets the code finish, but the driver cannot park again.
	res := runIn(t, inst, &Request{Code: "import os\nos.close(0)\nopen('f', 'w').write('x')\nprint('done')"})
	if res.ExitCode != 0 || res.Error != nil || res.Stdout != "done\n" || len(res.Files) != 1 {
		t.Errorf("%+v", res)
	}
	select {
	case <-inst.Stopped():
	case <-time.After(time.Second):
		t.Fatal("the interpreter did not end")
	}
	if inst.Alive() {
		t.Error("alive without its stdin")
	}
}

func TestDeterministic(t *testing.T) {
	code := `import random, time, os, uuid
print(random.random(), random.randint(0, 10**9), time.time(), time.monotonic(), os.urandom(8).hex(), uuid.uuid4(), {str(i) for i in range(5)})
time.sleep(0.01)
print(time.time())
`
	det := &sandbox.Determinism{Time: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC), Seed: 7}
	a := runIn(t, newInstance(t), &Request{Code: code, Deterministic: det})
	b := runIn(t, newInstance(t), &Request{Code: code, Deterministic: det})
	if a.ExitCode != 0 || a.Stdout != b.Stdout {
		t.Fatalf("deterministic runs differ:\n%s%s\n%s", a.Stdout, a.Stderr, b.Stdout)
	}
	if !strings.Contains(a.Stdout, " 1714564800.") {
		t.Errorf("time.time() does not start at the given time: %s", a.Stdout)
	}
	det2 := *det
	det2.Seed = 8
	c := runIn(t, newInstance(t), &Request{Code: code, Deterministic: &det2})
	if c.Stdout == a.Stdout {
		t.Errorf("another seed gave the same output")
	}
	// Real runs differ between instances.
	r1 := runIn(t, newInstance(t), &Request{Code: code})
	r2 := runIn(t, newInstance(t), &Request{Code: code})
	if r1.Stdout == r2.Stdout {
		t.Errorf("two real runs gave the same output: %s", r1.Stdout)
	}
	t.Log(a.Stdout)
}

func TestLargeCodeAndUnicode(t *testing.T) {
	inst := newInstance(t)
	code := "x = '" + strings.Repeat("a", 300_000) + "'\nprint(len(x), 'héllo ✓', __import__('os').environ['GREETING'])"
	res := runIn(t, inst, &Request{Code: code, Env: map[string]string{"GREETING": "grüß dich"}})
	if res.Stdout != "300000 héllo ✓ grüß dich\n" {
		t.Errorf("stdout = %q, stderr %q", res.Stdout, res.Stderr)
	}
}
