package heavy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// sentries counts the sandbox processes (`runsc ... boot`) of rt's sandboxes, read from /proc.
func sentries(rt *Runtime) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if containsArg(args, "boot") && strings.Contains(string(b), rt.runsc.state) {
			n++
		}
	}
	return n
}

// Through the Manager with heavy.session_hibernate_after set: a session left unused hibernates
// (paused into the store, its sandbox and the sandbox's processes gone, its state still live as
// clients see it), and its next run resumes it with its variables and files, the result saying
// it was restored.
func TestSessionHibernatesWhenIdle(t *testing.T) {
	store, err := snapstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rt := ttRuntime(t, Options{Snapshots: store, HibernateAfter: 2 * time.Second})
	if got := rt.Capabilities().HibernateAfter; got != 2*time.Second {
		t.Fatalf("Capabilities().HibernateAfter = %v", got)
	}
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{rt}, StateDir: t.TempDir(), Snapshots: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ctx := context.Background()
	info, err := m.CreateSession(ctx, sandbox.SessionOptions{Tier: Tier, Limits: limits(t, 120*time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	run := func(code string) *sandbox.Result {
		t.Helper()
		res, err := m.RunInSession(ctx, info.ID, &sandbox.RunRequest{Code: code, Limits: limits(t, 120*time.Second)})
		if err != nil {
			t.Fatalf("%q: %v", code, err)
		}
		if res.Error != nil {
			t.Fatalf("%q: %+v %s", code, res.Error, res.Stderr)
		}
		return res
	}
	run("import pandas as pd\nx = 41\ndf = pd.DataFrame({'a': [1, 2, 3]})\nopen('kept.txt', 'w').write('kept')")
	if err := m.WriteFile(ctx, info.ID, "put.txt", []byte("put")); err != nil {
		t.Fatal(err)
	}
	if n := sentries(rt); n != 1 {
		t.Fatalf("%d sandbox processes for one live session", n)
	}
	// Its sandbox goes: no slot held, no sandbox process left; clients still see it live.
	deadline := time.Now().Add(90 * time.Second)
	for len(rt.slots) != 0 || sentries(rt) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("not hibernated after 90 s unused: %d slots held and %d sandbox processes left", len(rt.slots), sentries(rt))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got, err := m.Session(info.ID); err != nil || got.State != sandbox.SessionLive {
		t.Fatalf("a hibernated session: %+v %v, want its state live", got, err)
	}
	res := run("print(x + 1, df.a.sum(), open('kept.txt').read(), open('put.txt').read())")
	if want := "42 6 kept put\n"; res.Stdout != want {
		t.Fatalf("after hibernation: %q, want %q", res.Stdout, want)
	}
	if res.Timing.Pool != "restored" || res.Timing.Start <= 0 {
		t.Fatalf("the run that resumed says pool %q, start %v; want restored and the restore's time", res.Timing.Pool, res.Timing.Start)
	}
	got, err := m.Session(info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != sandbox.SessionLive || sentries(rt) != 1 {
		t.Fatalf("after its next run: state %s, %d sandbox processes", got.State, sentries(rt))
	}
	if res := run("print(x)"); res.Timing.Pool != "session" || res.Stdout != "41\n" {
		t.Fatalf("the run after: pool %q, %q", res.Timing.Pool, res.Stdout)
	}
}

// A session with a command running stays live however long it is unused.
func TestSessionWithCommandStaysLive(t *testing.T) {
	rt := ttRuntime(t, Options{HibernateAfter: time.Second})
	s := ttSession(t, rt)
	if why := s.MustStayLive(); why != "" {
		t.Fatalf("an idle session must stay live: %s", why)
	}
	p, err := s.StartCommand(context.Background(), sandbox.CommandSpec{Argv: []string{"sleep", "30"}, Dir: "/"}, discard{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	deadline := time.Now().Add(60 * time.Second)
	for s.MustStayLive() == "" {
		if time.Now().After(deadline) {
			t.Fatal("a running command does not keep the session live")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if why := s.MustStayLive(); !strings.Contains(why, "command") {
		t.Fatalf("why: %q", why)
	}
}
