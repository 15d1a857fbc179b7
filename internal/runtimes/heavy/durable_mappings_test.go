package heavy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// A durable checkpoint (`runsc checkpoint --leave-running`) drops every file mapping's
// translations for its save and the runsc patch gets them again before the sandbox resumes
// (pkg/sentry/mm/retranslate.go, RunscBuild 12): the live session's mappings must show what they
// showed before, a shared mapping and the file stay one (each sees the other's writes after the
// checkpoint), a private mapping keeps its own bytes, the shared libraries still run, and the
// checkpoint restores the step as it was.
func TestDurableCheckpointKeepsFileMappings(t *testing.T) {
	store, err := snapstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rt := ttRuntime(t, Options{Snapshots: store, DurableQuiet: 50 * time.Millisecond})
	ctx := context.Background()
	s := ttSession(t, rt)
	out(t, s, `import mmap, os, numpy as np
fd = os.open('/home/user/m.bin', os.O_RDWR | os.O_CREAT)
os.write(fd, b'a' * (1 << 20))
m = mmap.mmap(fd, 1 << 20, mmap.MAP_SHARED)
p = mmap.mmap(fd, 1 << 20, mmap.MAP_PRIVATE)
m[0:5] = b'SHARE'
p[0:5] = b'PRIVA'
v = np.arange(1000).sum()
`)
	if err := s.Snapshot(ctx, "st_1"); err != nil {
		t.Fatal(err)
	}
	ref, err := s.Persist(ctx, "st_1")
	if err != nil || ref.Ref == "" {
		t.Fatalf("the step was not made durable: %+v %v", ref, err)
	}
	got := out(t, s, `print(m[0:5], p[0:5], p[5:7], os.pread(fd, 5, 0), v, np.arange(2000).sum())
os.pwrite(fd, b'FILE!', 4096)
m[8192:8197] = b'MMAPW'
p[12288:12293] = b'MINE!'
print(m[4096:4101], os.pread(fd, 5, 8192), os.pread(fd, 5, 12288), p[12288:12293])
`)
	want := "b'SHARE' b'PRIVA' b'aa' b'SHARE' 499500 1999000\nb'FILE!' b'MMAPW' b'aaaaa' b'MINE!'\n"
	if got != want {
		t.Fatalf("the live session's mappings after a durable checkpoint:\n%s\nwant\n%s", got, want)
	}
	s.Close()
	back, err := rt.Restore(ctx, ref.Ref, sandbox.SessionOptions{Limits: limits(t, 120*time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	got = out(t, back, "print(m[0:5], p[0:5], m[4096:4101], m[8192:8197], v)")
	if strings.TrimSpace(got) != "b'SHARE' b'PRIVA' b'aaaaa' b'aaaaa' 499500" {
		t.Fatalf("restored from the checkpoint: %q", got)
	}
}
