package snapstore

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestPutGetDedupeGC(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, n, err := s.Put([]byte("page a"))
	if err != nil || n != 6 {
		t.Fatalf("put: %v %d", err, n)
	}
	if _, n, _ := s.Put([]byte("page a")); n != 0 {
		t.Fatalf("a second put of the same bytes added %d bytes", n)
	}
	b, _, _ := s.Put([]byte("page b"))
	m1, _, err := s.PutManifest([]string{a}, []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	m2, _, _ := s.PutManifest([]string{a, b}, []byte("two"))
	old := time.Now().Add(-2 * time.Minute)
	_ = filepath.WalkDir(s.Dir(), func(p string, e fs.DirEntry, err error) error {
		return os.Chtimes(p, old, old)
	})
	if _, err := s.GC([]string{m1}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(a); err != nil || !bytes.Equal(got, []byte("page a")) {
		t.Fatalf("a blob a kept manifest names was collected: %v", err)
	}
	if _, err := s.Get(b); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a blob only a collected manifest named is still there: %v", err)
	}
	if _, _, err := s.Manifest(m2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a manifest not among the roots is still there: %v", err)
	}
	refs, body, err := s.Manifest(m1)
	if err != nil || len(refs) != 1 || string(body) != "one" {
		t.Fatalf("manifest: %v %v %q", err, refs, body)
	}
	if _, err := s.Get("nonsense"); err == nil {
		t.Fatal("a malformed digest was accepted")
	}
}

// A file put into the store is moved, not copied, named by its digest, deduplicated against what
// the store has, and can be linked out again under a name of the caller's.
func TestPutFileLinkBlob(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	write := func(content string) string {
		p := filepath.Join(s.TmpDir(), "image")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := write("checkpoint pages")
	d, n, err := s.PutFile(p)
	if err != nil || n != 16 || d != Digest([]byte("checkpoint pages")) {
		t.Fatalf("put file: %s %d %v", d, n, err)
	}
	if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the file is still at its path: %v", err)
	}
	p = write("checkpoint pages")
	if d2, n, err := s.PutFile(p); err != nil || n != 0 || d2 != d {
		t.Fatalf("second put file: %s %d %v", d2, n, err)
	}
	if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a duplicate was left at its path: %v", err)
	}
	dst := filepath.Join(t.TempDir(), "pages.img")
	if err := s.LinkBlob(d, dst); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(dst); err != nil || string(b) != "checkpoint pages" {
		t.Fatalf("linked blob: %q %v", b, err)
	}
	if err := s.LinkBlob(Digest([]byte("gone")), dst+"2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("link of a missing blob: %v", err)
	}
}
