package heavy

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The sandbox sees the image's files, not the host's, and what it writes stays in the sandbox.
func TestHostFilesInvisible(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: -1})
	l := limits(t, 30*time.Second)
	s := newSession(t, rt, l)
	img, err := os.ReadFile(filepath.Join(rt.Image().Rootfs(), "etc/shadow"))
	if err != nil {
		t.Fatal(err)
	}
	host, err := os.ReadFile("/etc/shadow")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(img, host) {
		t.Skip("the host's /etc/shadow equals the image's: nothing to tell apart")
	}
	// The code runs unprivileged in the sandbox, so it may not read shadow at all; what it can
	// see of it is the image's file.
	res, err := s.Run(context.Background(), &sandbox.RunRequest{Limits: l, Code: `
import os
st = os.stat('/etc/shadow')
print(st.st_size)
try:
    data = open('/etc/shadow', 'rb').read()
    print('read', len(data))
except PermissionError:
    print('denied')
`})
	if err != nil || res.Error != nil {
		t.Fatalf("%+v %v", res, err)
	}
	lines := strings.Fields(res.Stdout)
	if len(lines) < 2 || lines[0] != strconv.Itoa(len(img)) {
		t.Fatalf("the sandbox's /etc/shadow is %q bytes; the image's is %d, the host's %d", lines, len(img), len(host))
	}
	if lines[1] == "read" && lines[2] != strconv.Itoa(len(img)) {
		t.Fatalf("read %s bytes of /etc/shadow, the image has %d", lines[2], len(img))
	}
	// The files API acts as the sandbox's user and only under the session's directories: it does
	// not read shadow at all (it used to, as root: issue 14).
	got, err := s.(sandbox.SessionFiles).ReadFile(context.Background(), "/etc/shadow")
	if sandbox.KindOf(err) != sandbox.KindInvalidRequest || len(got) > 0 {
		t.Fatalf("files API /etc/shadow: %d bytes %v, want invalid_request", len(got), err)
	}

	// Writes land in the sandbox's own memory-backed overlay: not in the image, not on the host.
	marker := "agentbox-marker-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	res, err = s.Run(context.Background(), &sandbox.RunRequest{Limits: l, Code: `
import os
for d in ('/tmp', '/home/user', '/var/tmp', '/dev/shm'):
    try:
        open(os.path.join(d, '` + marker + `'), 'w').write('x')
    except OSError as e:
        print(d, e)
print(sorted(os.listdir('/tmp')))
`})
	if err != nil || res.Error != nil || !strings.Contains(res.Stdout, marker) {
		t.Fatalf("%+v %v", res, err)
	}
	s.Close()
	found := []string{}
	for _, root := range []string{rt.Image().Dir, "/tmp", "/var/tmp", "/dev/shm", "/home", "/root", rt.opts.StateDir} {
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Name() == marker {
				found = append(found, p)
			}
			return nil
		})
	}
	if len(found) > 0 {
		t.Fatalf("a file written in the sandbox appears on the host: %v", found)
	}
}

// A server on the host's loopback is out of reach: the sandbox's 127.0.0.1 is its own.
func TestHostLoopbackUnreachable(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: -1})
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
	port := ln.Addr().(*net.TCPAddr).Port
	res, err := rt.Run(context.Background(), &sandbox.RunRequest{Limits: limits(t, 20*time.Second), Code: `
import socket
for host in ('127.0.0.1', 'localhost', '::1', '10.0.2.2', '172.17.0.1', '169.254.169.254'):
    try:
        socket.create_connection((host, ` + strconv.Itoa(port) + `), timeout=2).close()
        print(host, 'connected')
    except OSError as e:
        print(host, 'failed')
`})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Stdout, "connected") || strings.Count(res.Stdout, "failed") != 6 {
		t.Fatalf("connections from the sandbox: %q %q", res.Stdout, res.Stderr)
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the host's loopback server accepted %d connections from the sandbox", n)
	}
}

// Hostile code ends with its typed error, and the next session works.
func TestHostileCodeThenNextSession(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: -1, MaxProcesses: 64})
	l := limits(t, 5*time.Second)
	l.MemoryBytes = 200 << 20
	cases := []struct {
		name, code string
		// ok tells whether the run's outcome is the one promised.
		ok func(*sandbox.Result, error) bool
	}{
		{"InfiniteLoop", "while True:\n    pass\n", func(_ *sandbox.Result, err error) bool { return errors.Is(err, sandbox.ErrTimeout) }},
		{"MemoryHog", "keep = []\nwhile True:\n    keep.append(bytearray(16 << 20))\n", func(_ *sandbox.Result, err error) bool { return errors.Is(err, sandbox.ErrMemoryLimit) }},
		// The classic bomb: every child forks too. RLIMIT_NPROC stops the forks (the code sees
		// BlockingIOError); the copies' memory may reach the limit first (memory_limit); or the
		// run times out while the children live.
		{"ForkBomb", "import os\nwhile True:\n    os.fork()\n", func(res *sandbox.Result, err error) bool {
			return errors.Is(err, sandbox.ErrTimeout) || errors.Is(err, sandbox.ErrMemoryLimit) ||
				err == nil && res.Error != nil && res.Error.Name == "BlockingIOError"
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, mode := range []string{"one-shot", "session"} {
				var res *sandbox.Result
				var err error
				start := time.Now()
				if mode == "one-shot" {
					res, err = rt.Run(context.Background(), &sandbox.RunRequest{Code: c.code, Limits: l})
				} else {
					s := newSession(t, rt, l)
					res, err = s.Run(context.Background(), &sandbox.RunRequest{Code: c.code, Limits: l})
					s.Close()
				}
				if !c.ok(res, err) {
					t.Fatalf("%s: result %+v, error %v", mode, res, err)
				}
				if e := sandbox.AsError(err); e != nil && e.Message == "" {
					t.Errorf("%s: an error without a message: %#v", mode, e)
				}
				t.Logf("%s: %v after %v", mode, err, time.Since(start).Round(time.Millisecond))
				next := newSession(t, rt, limits(t, 20*time.Second))
				if got := mustRun(t, next, limits(t, 20*time.Second), "print(6 * 7)\n"); got != "42\n" {
					t.Fatalf("the next session: %q", got)
				}
				next.Close()
			}
		})
	}
}

// A child the code forks and lets run on (no exec, no _exit) finishes the cell in its own process
// and must not speak for it: the cell's result is the parent's, and the next cell sees the
// parent's state.
func TestForkedChildDoesNotReport(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: -1})
	l := limits(t, 20*time.Second)
	s := newSession(t, rt, l)
	for i := range 3 {
		res, err := s.Run(context.Background(), &sandbox.RunRequest{Limits: l, Code: "import os, time\npid = os.fork()\nif pid == 0:\n    time.sleep(0.2)\n    x = 'child'\n    raise SystemExit(7)\nx = 'parent %d' % " + strconv.Itoa(i) + "\nos.waitpid(pid, 0)\nprint('waited')\n"})
		if err != nil || res.ExitCode != 0 || res.Stdout != "waited\n" {
			t.Fatalf("cell %d: %+v %v", i, res, err)
		}
		if got := mustRun(t, s, l, "print(x)\n"); got != "parent "+strconv.Itoa(i)+"\n" {
			t.Fatalf("after cell %d the session sees %q", i, got)
		}
	}
}
