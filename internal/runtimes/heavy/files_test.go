package heavy

import (
	"bytes"
	"context"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The files API works for the session's code, not for root: links the code plants do not take it
// out of the session's directories (/home/user and /tmp), it writes nowhere else, listing and
// removing do not follow links, and what it writes belongs to the sandbox's user (issue 14).
func TestFilesHostileLinks(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: -1})
	l := limits(t, 30*time.Second)
	s := newSession(t, rt, l)
	f := s.(sandbox.SessionFiles)
	ctx := context.Background()
	kind := func(what string, err error, want sandbox.Kind) {
		t.Helper()
		if got := sandbox.KindOf(err); got != want {
			t.Errorf("%s: %v (kind %q), want %s", what, err, got, want)
		}
	}

	// The code plants links out: to shadow, to /etc, to the interpreter's packages, and into /tmp
	// (another root: an absolute link leaves the one it is in).
	site := strings.TrimSpace(mustRun(t, s, l, `
import os, site
pkgs = [p for p in site.getsitepackages() if os.path.isdir(p)][0]
os.symlink('/etc/shadow', 'link')
os.symlink('../../etc/shadow', 'rel-link')
os.symlink('/etc', 'etc-link')
os.symlink(pkgs, 'pkgs-link')
os.makedirs('/tmp/keep')
open('/tmp/keep/x', 'w').write('kept')
os.symlink('/tmp/keep', 'tmp-link')
os.makedirs('tree')
os.symlink('/etc', 'tree/etc-link')
print(pkgs)
`))
	if site == "" {
		t.Fatal("no site-packages directory")
	}

	// Reads: refused, never the file's bytes.
	for _, p := range []string{"link", "rel-link", "etc-link/shadow", "etc-link/passwd", "/etc/shadow", "/etc/passwd"} {
		b, err := f.ReadFile(ctx, p)
		kind("read "+p, err, sandbox.KindInvalidRequest)
		if len(b) > 0 {
			t.Errorf("read %s: %d bytes", p, len(b))
		}
	}
	_, err := f.ListFiles(ctx, "etc-link")
	kind("list etc-link", err, sandbox.KindInvalidRequest)

	// Writes: through a link to a directory, to /etc, to the packages, up with "..": refused, and
	// nothing lands there.
	for _, p := range []string{"etc-link/agentbox-pwned", "/etc/agentbox-pwned", "pkgs-link/agentbox_pwned.py",
		site + "/agentbox_pwned.py", "../../etc/agentbox-pwned", "/var/tmp/agentbox-pwned"} {
		kind("write "+p, f.WriteFile(ctx, p, []byte("import os\n")), sandbox.KindInvalidRequest)
	}
	if got := mustRun(t, s, l, "import os\nprint([p for p in ('/etc/agentbox-pwned', '"+site+"/agentbox_pwned.py', '/var/tmp/agentbox-pwned') if os.path.lexists(p)])\n"); got != "[]\n" {
		t.Fatalf("writes landed outside the session's directories: %s", got)
	}

	// A listing shows the links as links and does not go through them.
	list, err := f.ListFiles(ctx, "/home/user")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]sandbox.FileInfo{}
	for _, e := range list {
		listed[e.Path] = e
		if strings.HasSuffix(e.Path, "/shadow") || strings.HasSuffix(e.Path, "/passwd") || strings.HasSuffix(e.Path, "/x") {
			t.Errorf("the listing went through a link: %s", e.Path)
		}
	}
	for _, name := range []string{"link", "etc-link", "pkgs-link", "tmp-link", "tree/etc-link"} {
		e, ok := listed["/home/user/"+name]
		if !ok || e.Dir || fs.FileMode(e.Mode)&fs.ModeSymlink == 0 {
			t.Errorf("%s listed as %+v (%v), want a link", name, e, ok)
		}
	}

	// Removing a link, or a directory holding one, removes the links, not what they point to.
	for _, p := range []string{"tmp-link", "etc-link", "tree"} {
		if err := f.RemoveFile(ctx, p); err != nil {
			t.Fatalf("remove %s: %v", p, err)
		}
	}
	if got := mustRun(t, s, l, "import os\nprint(open('/tmp/keep/x').read(), os.path.exists('/etc/passwd'), [p for p in ('tmp-link', 'etc-link', 'tree') if os.path.lexists(p)])\n"); got != "kept True []\n" {
		t.Fatalf("after removing links: %q", got)
	}
	kind("remove /tmp itself", f.RemoveFile(ctx, "/tmp"), sandbox.KindInvalidRequest)

	// A write at a link's own name replaces the link with the file.
	if err := f.WriteFile(ctx, "link", []byte("mine")); err != nil {
		t.Fatal(err)
	}
	if got := mustRun(t, s, l, "import os\nprint(os.path.islink('link'), open('link').read())\n"); got != "False mine\n" {
		t.Fatalf("after writing at the link: %q", got)
	}

	// What the API writes belongs to the sandbox's user, in either root, parents included.
	for _, p := range []string{"owned/deep/file.txt", "/tmp/owned/file.txt"} {
		if err := f.WriteFile(ctx, p, []byte("x")); err != nil {
			t.Fatalf("write %s: %v", p, err)
		}
	}
	if got := mustRun(t, s, l, `
import os
uid, gid = os.getuid(), os.getgid()
for p in ('owned', 'owned/deep', 'owned/deep/file.txt', '/tmp/owned', '/tmp/owned/file.txt'):
    st = os.stat(p)
    print(p, st.st_uid == uid != 0, st.st_gid == gid)
`); strings.Contains(got, "False") || strings.Count(got, "True True") != 5 {
		t.Fatalf("owners of what the API wrote:\n%s", got)
	}
	// And the code can change and remove it.
	mustRun(t, s, l, "open('owned/deep/file.txt', 'a').write('y')\nimport shutil\nshutil.rmtree('/tmp/owned')\n")
	if b, err := f.ReadFile(ctx, "owned/deep/file.txt"); err != nil || !bytes.Equal(b, []byte("xy")) {
		t.Fatalf("read back: %q %v", b, err)
	}
}
