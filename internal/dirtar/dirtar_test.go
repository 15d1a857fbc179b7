package dirtar

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Write and Extract keep a tree as it was (modes, owners, links, nanosecond times) and
// replace what the target held; a tar entry leading outside is refused.
func TestRoundTrip(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "d", "e"), 0o750)
	os.WriteFile(filepath.Join(src, "d", "e", "f"), []byte("hello"), 0o640)
	os.Symlink("../../etc/passwd", filepath.Join(src, "d", "evil"))
	os.Mkdir(filepath.Join(src, "lost+found"), 0o700)
	os.WriteFile(filepath.Join(src, "lost+found", "x"), []byte("x"), 0o600)
	when := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	os.Chtimes(filepath.Join(src, "d", "e", "f"), when, when)
	os.Chtimes(filepath.Join(src, "d"), when, when)
	var buf bytes.Buffer
	n, err := Write(src, &buf)
	if err != nil || n != 5 {
		t.Fatalf("tar: %d %v", n, err)
	}
	p := filepath.Join(t.TempDir(), "v.tar")
	os.WriteFile(p, buf.Bytes(), 0o600)
	dst := t.TempDir()
	os.WriteFile(filepath.Join(dst, "stale"), []byte("old"), 0o600)
	if err := Extract(dst, p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dst, "stale")); !os.IsNotExist(err) {
		t.Errorf("a file the checkpoint did not have stayed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "lost+found")); !os.IsNotExist(err) {
		t.Errorf("lost+found was copied: %v", err)
	}
	fi, err := os.Stat(filepath.Join(dst, "d", "e", "f"))
	if err != nil || !fi.ModTime().Equal(when) || fi.Mode().Perm() != 0o640 {
		t.Fatalf("file: %v %v", fi, err)
	}
	if di, err := os.Stat(filepath.Join(dst, "d")); err != nil || !di.ModTime().Equal(when) || di.Mode().Perm() != 0o750 {
		t.Fatalf("dir: %v %v", di, err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "d", "evil")); err != nil || l != "../../etc/passwd" {
		t.Fatalf("link: %q %v", l, err)
	}

	// An entry naming a path outside the volume.
	var bad bytes.Buffer
	tw := tar.NewWriter(&bad)
	tw.WriteHeader(&tar.Header{Name: "../outside", Typeflag: tar.TypeReg, Size: 1, Mode: 0o600})
	tw.Write([]byte("x"))
	tw.Close()
	os.WriteFile(p, bad.Bytes(), 0o600)
	if err := Extract(dst, p); err == nil {
		t.Fatal("an entry outside the volume was extracted")
	}
	// Through a link: d/evil points outside; writing d/evil/x must not leave dst.
	os.MkdirAll(filepath.Join(dst, "d"), 0o700)
	bad.Reset()
	tw = tar.NewWriter(&bad)
	tw.WriteHeader(&tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o700})
	tw.WriteHeader(&tar.Header{Name: "d/up", Typeflag: tar.TypeSymlink, Linkname: "../..", Mode: 0o777})
	tw.WriteHeader(&tar.Header{Name: "d/up/escaped", Typeflag: tar.TypeReg, Size: 1, Mode: 0o600})
	tw.Write([]byte("x"))
	tw.Close()
	os.WriteFile(p, bad.Bytes(), 0o600)
	if err := Extract(dst, p); err == nil {
		t.Fatal("an entry through a link leading out was extracted")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dst), "escaped")); err == nil {
		t.Fatal("a file was written outside the volume")
	}
}
