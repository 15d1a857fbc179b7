package heavy

import (
	"context"
	"testing"
	"time"
)

// waitReleased waits until the latest step's parked process of s was released while idle:
// replaced by a quiet one (a guest with FeatureQuietSnaps), or ended.
func waitReleased(t *testing.T, s *session, step string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s.mu.Lock()
		id, kept := s.tt.snaps[step]
		refreshed := s.refreshed.Load()
		s.mu.Unlock()
		if kept && (id == 0 && s.released.Load() || id != 0 && refreshed) {
			return
		}
		if !kept {
			t.Fatalf("step %s was dropped instead of released", step)
		}
		if time.Now().After(deadline) {
			t.Fatalf("step %s's snapshot not released 30 s after the session went idle", step)
		}
	}
}

// A session idle past SnapshotReleaseIdle ends its latest step's parked process, and every kept
// step can still be rewound to: the released one is taken again before the next run, file write
// or rewind, with its variables and files. Something that used the sandbox after the step (a
// file written) keeps the snapshot, and so does a rewind (the live state is not the latest step's).
func TestIdleSessionReleasesLatestSnapshot(t *testing.T) {
	rt := ttRuntime(t, Options{SnapshotReleaseIdle: 300 * time.Millisecond})
	s := ttSession(t, rt)
	ctx := context.Background()
	step(t, s, 1)
	step(t, s, 2)
	waitReleased(t, s, "s2")
	if !s.refreshed.Load() {
		t.Fatal("the release ended step 2's parked process instead of replacing it (the guest has quiet snapshots)")
	}
	// The live interpreter is step 2's state; the next run starts at once (an older guest's
	// takes step 2's snapshot first).
	step2 := "2 [0, 1] ['f1.txt', 'f2.txt', 'shared.txt'] {'f1.txt': '1', 'f2.txt': '2', 'shared.txt': 'v2'}\n"
	if got := out(t, s, show); got != step2 {
		t.Fatalf("after the release: %q, want %q", got, step2)
	}
	step(t, s, 3)
	for _, c := range []struct{ step, want string }{
		{"s2", step2},
		{"s1", "1 [0] ['f1.txt', 'shared.txt'] {'f1.txt': '1', 'shared.txt': 'v1'}\n"},
		{"s3", "3 [0, 1, 2] ['f1.txt', 'f2.txt', 'f3.txt', 'shared.txt'] {'f1.txt': '1', 'f2.txt': '2', 'f3.txt': '3', 'shared.txt': 'v3'}\n"},
	} {
		if err := s.Rewind(ctx, c.step, ""); err != nil {
			t.Fatalf("rewind to %s: %v", c.step, err)
		}
		if got := out(t, s, show); got != c.want {
			t.Fatalf("after the rewind to %s: %q, want %q", c.step, got, c.want)
		}
	}

	// Released, then a file written through the session (not a run): the snapshot is taken
	// before the write, so a rewind to the step drops the file.
	step(t, s, 4)
	waitReleased(t, s, "s4")
	if err := s.Rewind(ctx, "s4", ""); err != nil { // released: taken again, then woken
		t.Fatalf("rewind to the released step: %v", err)
	}
	if got := out(t, s, "y = 1\nprint(x)"); got != "4\n" {
		t.Fatalf("after the rewind to the released step: %q", got)
	}
	if err := s.Snapshot(ctx, "s4-look"); err != nil {
		t.Fatal(err)
	}
	waitReleased(t, s, "s4-look")
	if err := s.WriteFile(ctx, "late.txt", []byte("late")); err != nil {
		t.Fatal(err)
	}
	if s.released.Load() {
		t.Fatal("a file write left the latest step released")
	}
	if err := s.Rewind(ctx, "s4-look", ""); err != nil {
		t.Fatal(err)
	}
	if got := out(t, s, "import os\nprint(x, os.path.exists('late.txt'))"); got != "4 False\n" {
		t.Fatalf("after the rewind to the step before the file write: %q", got)
	}

	// After a rewind the live state is not the latest step's: nothing is released.
	step(t, s, 5)
	step(t, s, 6)
	if err := s.Rewind(ctx, "s5", ""); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	s.mu.Lock()
	id := s.tt.snaps["s6"]
	s.mu.Unlock()
	if id == 0 || s.released.Load() {
		t.Fatalf("step s6 released after a rewind to s5 (id %d)", id)
	}
	if err := s.Rewind(ctx, "s6", ""); err != nil {
		t.Fatal(err)
	}
	if got := out(t, s, "print(x)"); got != "6\n" {
		t.Fatalf("back on step 6: %q", got)
	}
}

// A released step's session pauses and resumes with its state, and a durable checkpoint taken
// while it is released wakes the step.
func TestIdleReleasedSessionPausesInHeavy(t *testing.T) {
	rt := ttRuntime(t, Options{SnapshotReleaseIdle: 300 * time.Millisecond, SnapshotKeepOnPause: 1})
	s := ttSession(t, rt)
	ctx := context.Background()
	step(t, s, 1)
	step(t, s, 2)
	waitReleased(t, s, "s2")
	if _, err := s.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if got := out(t, s, "print(x, open('shared.txt').read())"); got != "2 v2\n" {
		t.Fatalf("after pause and resume: %q", got)
	}
	if err := s.Rewind(ctx, "s2", ""); err != nil {
		t.Fatalf("rewind to the step the pause kept: %v", err)
	}
	if got := out(t, s, "print(x)"); got != "2\n" {
		t.Fatalf("after the rewind: %q", got)
	}
}

// The code's signal mask survives an idle release: the quiet fork blocks SIGUSR2 around itself,
// and a SIGUSR2 the code holds blocked and pending stays blocked and pending (delivered, it would
// end the interpreter).
func TestIdleReleaseKeepsTheCodesSignalMask(t *testing.T) {
	rt := ttRuntime(t, Options{SnapshotReleaseIdle: 300 * time.Millisecond})
	s := ttSession(t, rt)
	ctx := context.Background()
	if got := out(t, s, "import os, signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})\nos.kill(os.getpid(), signal.SIGUSR2)\nprint(signal.SIGUSR2 in signal.sigpending())"); got != "True\n" {
		t.Fatalf("SIGUSR2 held pending: %q", got)
	}
	if err := s.Snapshot(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	waitReleased(t, s, "held")
	if !s.refreshed.Load() {
		t.Fatal("the release ended the parked process instead of replacing it (the guest has quiet snapshots)")
	}
	if got := out(t, s, "print(signal.SIGUSR2 in signal.pthread_sigmask(signal.SIG_BLOCK, []), signal.SIGUSR2 in signal.sigpending())"); got != "True True\n" {
		t.Fatalf("after the release, SIGUSR2 blocked and pending: %q, want True True", got)
	}
}
