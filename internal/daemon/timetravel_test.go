package daemon_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// Time travel over HTTP, and sessions that outlive a daemon killed with SIGKILL.

const ttHelperEnv = "AGENTBOX_TIMETRAVEL_DAEMON"

// ttHeavyEnv, set, gives that daemon the heavy tier too.
const ttHeavyEnv = "AGENTBOX_TIMETRAVEL_HEAVY"

// ttConfig is the daemon of these tests: real nano, no heavy, its own directories under dir.
func ttConfig(t *testing.T, dir string) config.Config {
	cfg := config.Default()
	cfg.Sessions.Dir = filepath.Join(dir, "sessions")
	cfg.ArtifactsDir = filepath.Join(dir, "artifacts")
	cfg.Audit.Dir = filepath.Join(dir, "audit")
	off := false
	cfg.Egress.Enabled = &off
	if err := heavy.Configure(&cfg, func(h *heavy.Config) { h.Enabled = heavy.Off }); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestTimeTravelDaemonProcess is the daemon TestSessionsSurviveKill starts and kills: the whole
// daemon (its manager and front doors on a loopback port) in a process of its own.
func TestTimeTravelDaemonProcess(t *testing.T) {
	dir := os.Getenv(ttHelperEnv)
	if dir == "" {
		t.Skip("the daemon TestSessionsSurviveKill starts and kills")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := ttConfig(t, dir)
	if os.Getenv(ttHeavyEnv) != "" {
		warm := 0
		if err := heavy.Configure(&cfg, func(h *heavy.Config) {
			h.Enabled, h.Warm, h.StateDir = heavy.On, &warm, filepath.Join(dir, "heavy")
		}); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
	}
	m, err := daemon.NewManager(context.Background(), cfg, log)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	srv, err := daemon.NewFrontDoors(m, daemon.FrontDoorOptions{APIKey: key, Logger: log})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	fmt.Println("ready http://" + ln.Addr().String())
	go func() { _ = http.Serve(ln, srv) }()
	io.Copy(io.Discard, os.Stdin) // until killed, or the parent goes away
	os.Exit(3)
}

// startTTDaemon starts the daemon process on dir and returns a client of it and the process.
func startTTDaemon(t *testing.T, dir string, env ...string) (*client.Client, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTimeTravelDaemonProcess$", "-test.v=false")
	cmd.Env = append(append(os.Environ(), ttHelperEnv+"="+dir), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready ") || strings.HasPrefix(sc.Text(), "error ") {
				lines <- sc.Text()
				break
			}
		}
		close(lines)
		io.Copy(io.Discard, stdout)
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(120 * time.Second):
		t.Fatal("the daemon did not start within 120s")
	}
	url, ok := strings.CutPrefix(line, "ready ")
	if !ok {
		t.Fatalf("the daemon: %q", line)
	}
	c, err := client.New(url, key)
	if err != nil {
		t.Fatal(err)
	}
	return c, cmd
}

func ttRun(t *testing.T, c *client.Client, id, code string) *api.Result {
	t.Helper()
	res, err := c.RunInSession(context.Background(), id, api.RunRequest{Code: code, Timeout: 30})
	if err != nil {
		t.Fatalf("run %q in %s: %v", code, id, err)
	}
	if res.Error != nil {
		t.Fatalf("run %q in %s raised %s: %s", code, id, res.Error.Name, res.Error.Value)
	}
	return res
}

// waitDurable waits until every step of a session is durable.
func waitDurable(t *testing.T, c *client.Client, id string) *api.StepList {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		l, err := c.Steps(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		done := true
		for _, st := range l.Steps {
			if st.Snapshot.State != "durable" {
				done = false
			}
		}
		if done {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: steps not durable after 60s: %+v", id, l.Steps)
		}
	}
}

func requireNano(t *testing.T) {
	t.Helper()
	testenv.RequireRoot(t)
	if err := (nano.Artifacts{Dir: nano.Dir(config.Default())}).Check(); err != nil {
		testenv.Skip(t, err.Error())
	}
}

// kill -9 of the daemon with three paused and two live sessions, then a restart on the same
// directories: all five answer their next run with their variables and files.
func TestSessionsSurviveKill(t *testing.T) {
	requireNano(t)
	dir := t.TempDir()
	c, cmd := startTTDaemon(t, dir)
	ctx := context.Background()
	var ids []string
	for i := range 5 {
		s, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "nano"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
		ttRun(t, c, s.ID, fmt.Sprintf("x = %d\nopen('/home/user/f.txt', 'w').write('session %d')", i, i))
		ttRun(t, c, s.ID, "x *= 10")
		waitDurable(t, c, s.ID)
	}
	for _, id := range ids[:3] {
		s, err := c.Pause(ctx, id)
		if err != nil || s.State != "paused" {
			t.Fatalf("pause %s: %+v %v", id, s, err)
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	c2, _ := startTTDaemon(t, dir)
	list, err := c2.ListSessions(ctx)
	if err != nil || len(list) != 5 {
		t.Fatalf("sessions after the restart: %+v %v", list, err)
	}
	for i, id := range ids {
		res := ttRun(t, c2, id, "print(x, open('/home/user/f.txt').read())")
		if want := fmt.Sprintf("%d session %d\n", i*10, i); res.Stdout != want {
			t.Errorf("session %s after kill -9: %q, want %q", id, res.Stdout, want)
		}
	}
}

// Over HTTP: steps, rewind, fork, pause, resume, inspect and diff, and their errors.
func TestTimeTravelHTTP(t *testing.T) {
	c, _ := start(t)
	ctx := context.Background()
	s, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "nano"})
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for k := 1; k <= 3; k++ {
		steps = append(steps, ttRun(t, c, s.ID, fmt.Sprintf("k = %d\nopen('/home/user/k.txt', 'w').write('%d')", k, k)).Step)
	}
	l := waitDurable(t, c, s.ID)
	if l.Head != steps[2] || len(l.Steps) != 3 || l.Steps[0].Code == "" || l.Steps[1].Parent != steps[0] {
		t.Fatalf("steps: %+v", l)
	}
	st, err := c.Step(ctx, s.ID, steps[0])
	if err != nil || st.Snapshot.State != "durable" || st.Snapshot.Bytes == 0 {
		t.Fatalf("step: %+v %v", st, err)
	}
	in, err := c.InspectStep(ctx, s.ID, steps[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Variables) != 1 || in.Variables[0].Name != "k" || in.Variables[0].Repr != "1" || len(in.Files) != 1 {
		t.Fatalf("inspect: %+v", in)
	}
	if b, err := c.ReadStepFile(ctx, s.ID, steps[0], "k.txt"); err != nil || string(b) != "1" {
		t.Fatalf("k.txt at the first step: %q %v", b, err)
	}
	var nf *client.Error
	if _, err := c.ReadStepFile(ctx, s.ID, steps[0], "nope.txt"); !errors.As(err, &nf) || nf.Code != api.CodeNotFound {
		t.Fatalf("a file the step did not have: %v", err)
	}
	d, err := c.DiffSteps(ctx, s.ID, steps[2], "")
	if err != nil || d.Base != steps[1] || len(d.Changed) != 1 || len(d.FilesChanged) != 1 {
		t.Fatalf("diff: %+v %v", d, err)
	}
	rs, err := c.Rewind(ctx, s.ID, steps[0])
	if err != nil || rs.Head != steps[0] {
		t.Fatalf("rewind: %+v %v", rs, err)
	}
	if got := ttRun(t, c, s.ID, "print(k, open('/home/user/k.txt').read())").Stdout; got != "1 1\n" {
		t.Fatalf("after the rewind: %q", got)
	}
	f, err := c.Fork(ctx, s.ID, steps[1])
	if err != nil || f.ForkedFrom != s.ID+"/"+steps[1] || f.ID == s.ID {
		t.Fatalf("fork: %+v %v", f, err)
	}
	if got := ttRun(t, c, f.ID, "print(k)").Stdout; got != "2\n" {
		t.Fatalf("fork: %q", got)
	}
	if p, err := c.Pause(ctx, f.ID); err != nil || p.State != "paused" {
		t.Fatalf("pause: %+v %v", p, err)
	}
	if r, err := c.Resume(ctx, f.ID); err != nil || r.State != "live" {
		t.Fatalf("resume: %+v %v", r, err)
	}
	if got := ttRun(t, c, f.ID, "print(k)").Stdout; got != "2\n" {
		t.Fatalf("fork after pause and resume: %q", got)
	}
	var ce *client.Error
	_, err = c.Rewind(ctx, s.ID, "st_nope")
	if !errors.As(err, &ce) || ce.Code != api.CodeNotFound || !strings.Contains(ce.Message, "st_nope") {
		t.Fatalf("rewind to an unknown step: %v", err)
	}
	_, err = c.Rewind(ctx, s.ID, "")
	if !errors.As(err, &ce) || ce.Code != api.CodeInvalidRequest {
		t.Fatalf("rewind without a step: %v", err)
	}
	_, err = c.Steps(ctx, "sb_nope")
	if !errors.As(err, &ce) || ce.Code != api.CodeNotFound {
		t.Fatalf("steps of an unknown session: %v", err)
	}
}

// DELETE /v1/sessions/{id}?keep=true closes a session keeping its state and steps: it answers
// the session, paused with kept_until; its steps list and its next run resumes it with its
// variables; keep that is not a boolean is a 400; a plain close frees everything.
func TestCloseKeepHTTP(t *testing.T) {
	c, _ := start(t)
	ctx := context.Background()
	s, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "nano"})
	if err != nil {
		t.Fatal(err)
	}
	ttRun(t, c, s.ID, "k = 7")
	waitDurable(t, c, s.ID)
	kept, err := c.CloseSessionKeep(ctx, s.ID)
	if err != nil || kept.State != "paused" || kept.KeptUntil == nil || !kept.KeptUntil.After(time.Now()) || kept.Steps != 1 {
		t.Fatalf("close with keep: %+v %v", kept, err)
	}
	if l, err := c.Steps(ctx, s.ID); err != nil || len(l.Steps) != 1 {
		t.Fatalf("the kept session's steps: %+v %v", l, err)
	}
	if got := ttRun(t, c, s.ID, "print(k)").Stdout; got != "7\n" {
		t.Fatalf("a run of the kept session: %q", got)
	}
	if g, err := c.GetSession(ctx, s.ID); err != nil || g.State != "live" || g.KeptUntil != nil {
		t.Fatalf("the kept session after a run: %+v %v", g, err)
	}
	req, _ := http.NewRequest(http.MethodDelete, c.URL()+"/v1/sessions/"+s.ID+"?keep=maybe", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "invalid_request") {
		t.Fatalf("keep=maybe: %d %s", res.StatusCode, body)
	}
	if err := c.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	var ce *client.Error
	if _, err := c.Steps(ctx, s.ID); !errors.As(err, &ce) || ce.Code != api.CodeNotFound {
		t.Fatalf("steps after a plain close: %v", err)
	}
}

// A rewind that was answered survives a kill -9 of the daemon right after it, and so does a step
// run on the branch after it: the restarted daemon brings the session back at that head, with
// every step, and its state.
func TestRewindSurvivesKill(t *testing.T) {
	requireNano(t)
	dir := t.TempDir()
	c, cmd := startTTDaemon(t, dir)
	ctx := context.Background()
	s, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "nano"})
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for i := 1; i <= 3; i++ {
		steps = append(steps, ttRun(t, c, s.ID, fmt.Sprintf("x = %d", i)).Step)
	}
	waitDurable(t, c, s.ID)
	if _, err := c.Rewind(ctx, s.ID, steps[0]); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Kill()
	cmd.Wait()

	c, cmd = startTTDaemon(t, dir)
	l, err := c.Steps(ctx, s.ID)
	if err != nil || l.Head != steps[0] || len(l.Steps) != 3 {
		t.Fatalf("after a kill -9 right after a rewind: head %s with %d steps (%v), want %s with 3", l.Head, len(l.Steps), err, steps[0])
	}
	if got := ttRun(t, c, s.ID, "print(x)\nx = 10").Stdout; got != "1\n" {
		t.Fatalf("the rewound session after a kill -9 printed %q, want 1", got)
	}
	waitDurable(t, c, s.ID)
	l, err = c.Steps(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	branch := l.Head
	cmd.Process.Kill()
	cmd.Wait()

	c, _ = startTTDaemon(t, dir)
	l, err = c.Steps(ctx, s.ID)
	if err != nil || l.Head != branch || len(l.Steps) != 4 {
		t.Fatalf("after a kill -9 after a step on the branch: head %s with %d steps (%v), want %s with 4", l.Head, len(l.Steps), err, branch)
	}
	if got := ttRun(t, c, s.ID, "print(x)").Stdout; got != "10\n" {
		t.Fatalf("the branch after a kill -9 printed %q, want 10", got)
	}
}
