package heavy

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// The latest step of a heavy session becomes durable when the session rests: a session restored
// from that checkpoint (as another daemon would, after a kill -9) holds the step's variables and
// files even when the live interpreter had moved on when it was taken; an older step is not
// checkpointed once a newer one exists; the checkpoint holds none of the session's secrets.
func TestDurableLatestStep(t *testing.T) {
	store, err := snapstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rt := ttRuntime(t, Options{Snapshots: store, DurableQuiet: 50 * time.Millisecond})
	secret := "tok-5e4d3c2b1a09f8e7d6c5"
	env := map[string]string{"TOKEN": secret}
	ctx := context.Background()
	sess, err := rt.NewSession(ctx, sandbox.SessionOptions{Limits: limits(t, 120*time.Second), Env: env})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	s := sess.(*session)
	run := func(code string) string {
		t.Helper()
		res, err := s.Run(ctx, &sandbox.RunRequest{Code: code, Env: env, Limits: limits(t, 120*time.Second)})
		if err != nil || res.Error != nil {
			t.Fatalf("%q: %v %+v", code, err, res)
		}
		return res.Stdout
	}
	run("import os\nx = 1\nseen = len(os.environ['TOKEN'])\nopen('/home/user/f.txt', 'w').write('one')")
	if err := s.Snapshot(ctx, "st_1"); err != nil {
		t.Fatal(err)
	}
	run("x = 2\nopen('/home/user/f.txt', 'w').write('two')")
	if err := s.Snapshot(ctx, "st_2"); err != nil {
		t.Fatal(err)
	}
	// st_1 is no longer the latest: coalesced away, at once.
	if ref, err := s.Persist(ctx, "st_1"); err != nil || ref.Ref != "" {
		t.Fatalf("an older step was checkpointed: %+v %v", ref, err)
	}
	// The live interpreter moves on before st_2's checkpoint runs.
	run("x = 3\nopen('/home/user/f.txt', 'w').write('three')")
	ref, err := s.Persist(ctx, "st_2")
	if err != nil || ref.Ref == "" || !ref.Latest {
		t.Fatalf("the latest step was not made durable: %+v %v", ref, err)
	}
	if got := run("print(x, open('/home/user/f.txt').read())"); got != "3 three\n" {
		t.Fatalf("the live session after its checkpoint: %q", got)
	}
	found := 0
	_ = filepath.Walk(store.Dir(), func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			found += bytes.Count(b, []byte(secret))
		}
		return nil
	})
	if found != 0 {
		t.Fatalf("the durable checkpoint holds the session's secret %d times", found)
	}
	c := rt.DurableCosts()
	if c.Count != 1 {
		t.Fatalf("checkpoints counted: %d", c.Count)
	}
	t.Logf("durable checkpoint of a latest step: held the session %v, durable after %v, %d MB", c.Held[0], c.Total[0], c.Bytes[0]>>20)

	// A restore, as a daemon restarted after a kill -9 (or another node) makes it.
	s.Close()
	back, err := rt.Restore(ctx, ref.Ref, sandbox.SessionOptions{Limits: limits(t, 120*time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	res, err := back.Run(ctx, &sandbox.RunRequest{Code: "print(x, seen, open('/home/user/f.txt').read())", Limits: limits(t, 120*time.Second)})
	if err != nil || res.Error != nil {
		t.Fatalf("restored: %v %+v", err, res)
	}
	if res.Stdout != "2 24 two\n" {
		t.Fatalf("restored at st_2: %q, want \"2 24 two\"", res.Stdout)
	}
}

// discard is an OutputSink that keeps nothing.
type discard struct{}

func (discard) Write(sandbox.Stream, []byte) {}

// While a command runs in the sandbox (a server that never ends), a step is not checkpointed,
// however long the session waits: Persist refuses with sandbox.ErrNotDurableNow and says why
// (the Manager turns it into a not_durable notice). Once the command ends, the step is made
// durable.
func TestDurableRefusedWhileACommandRuns(t *testing.T) {
	store, err := snapstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rt := ttRuntime(t, Options{Snapshots: store, DurableQuiet: 50 * time.Millisecond, DurableMaxDefer: 200 * time.Millisecond})
	ctx := context.Background()
	s := ttSession(t, rt)
	p, err := s.StartCommand(ctx, sandbox.CommandSpec{Argv: []string{"sleep", "600"}, Dir: "/home/user"}, discard{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(ctx, &sandbox.RunRequest{Code: "x = 7", Limits: limits(t, 120*time.Second)})
	if err != nil || res.Error != nil {
		t.Fatalf("run: %v %+v", err, res)
	}
	if err := s.Snapshot(ctx, "st_1"); err != nil {
		t.Fatal(err)
	}
	ref, err := s.Persist(ctx, "st_1")
	if !errors.Is(err, sandbox.ErrNotDurableNow) || ref.Ref != "" || !strings.Contains(err.Error(), "1 command(s) running") {
		t.Fatalf("Persist with a command running: %+v %v, want ErrNotDurableNow naming the command", ref, err)
	}
	t.Logf("refused: %v", err)
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the command did not end within 30s of its kill")
	}
	ref, err = s.Persist(ctx, "st_1")
	if err != nil || ref.Ref == "" {
		t.Fatalf("Persist once the command ended: %+v %v", ref, err)
	}
}
