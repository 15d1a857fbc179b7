package heavy

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// A session's env (its secrets) is not kept in its checkpoints: none of the store's files holds
// the value after a pause, though the code read it; the next run has it again from the session's
// env, and the rest of the state came back.
func TestSecretsNotInCheckpoint(t *testing.T) {
	store, err := snapstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rt := ttRuntime(t, Options{Snapshots: store})
	secret := "tok-9f8e7d6c5b4a39281706"
	env := map[string]string{"TOKEN": secret}
	sess, err := rt.NewSession(context.Background(), sandbox.SessionOptions{Limits: limits(t, 60*time.Second), Env: env})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	s := sess.(*session)
	ctx := context.Background()
	run := func(code string) string {
		t.Helper()
		// The Manager lays the session's env over every run.
		res, err := s.Run(ctx, &sandbox.RunRequest{Code: code, Env: env, Limits: limits(t, 60*time.Second)})
		if err != nil || res.Error != nil {
			t.Fatalf("%q: %v %+v", code, err, res)
		}
		return res.Stdout
	}
	run("import os\nkept = 'x' * 3\nprint(len(os.environ['TOKEN']))\nlines = [os.environ['TOKEN'][:4] + str(i) for i in range(3)]")
	if _, err := s.Pause(ctx); err != nil {
		t.Fatal(err)
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
		t.Fatalf("the checkpoint holds the session's secret %d times", found)
	}
	if got := run("print(kept, lines, os.environ['TOKEN'] == " + "'" + secret + "')"); got != "xxx ['tok-0', 'tok-1', 'tok-2'] True\n" {
		t.Fatalf("after the resume: %q", got)
	}
}

// scrub finds a secret wherever it is in a file, across the boundary of its read chunks too, and
// leaves every other byte as it was.
func TestScrubAcrossChunks(t *testing.T) {
	dir := t.TempDir()
	secret := []byte("s3cret-value-0123")
	data := bytes.Repeat([]byte{'a'}, 8<<20+64)
	for _, at := range []int{0, 100, 8<<20 - 5, len(data) - len(secret)} {
		copy(data[at:], secret)
	}
	if err := os.WriteFile(filepath.Join(dir, "pages.img"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := scrub(dir, [][]byte{secret, []byte("absent-secret")})
	if err != nil || n != 4 {
		t.Fatalf("scrubbed %d (%v), want 4", n, err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "pages.img"))
	want := bytes.ReplaceAll(data, secret, make([]byte, len(secret)))
	if !bytes.Equal(got, want) {
		t.Fatal("the scrubbed file differs from the original with the secrets zeroed")
	}
}
