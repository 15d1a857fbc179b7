package artifacts

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

func TestPutOpen(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := &sandbox.Artifact{Name: "figure-1.png", MIME: "image/png", Content: []byte("\x89PNG fake"), SHA256: "wrong", Size: 1}
	if err := s.Put(a); err != nil {
		t.Fatal(err)
	}
	if a.ID == "" || a.Content != nil || a.Size != 9 || len(a.SHA256) != 64 {
		t.Fatalf("after Put: %+v", a)
	}
	got, rc, err := s.Open(a.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	if !bytes.Equal(b, []byte("\x89PNG fake")) || got.Name != "figure-1.png" || got.MIME != "image/png" || got.SHA256 != a.SHA256 {
		t.Fatalf("Open: %+v %q", got, b)
	}
	for _, id := range []string{"art_00", "../x", "art_" + a.ID[4:len(a.ID)-1] + "g", "art_000000000000000000000000"} {
		if _, _, err := s.Open(id); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Open(%q): %v, want not found", id, err)
		}
	}
}

// The store keeps at most MaxBytes: the oldest artifacts go first.
func TestEvictOldest(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{MaxBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 3 {
		a := &sandbox.Artifact{Name: "a", Content: bytes.Repeat([]byte{byte(i)}, 40)}
		if err := s.Put(a); err != nil {
			t.Fatal(err)
		}
		// Make the order of modification times certain.
		old := time.Now().Add(time.Duration(i-10) * time.Second)
		os.Chtimes(filepath.Join(dir, a.ID+".bin"), old, old)
		ids = append(ids, a.ID)
	}
	if _, _, err := s.Open(ids[0]); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("oldest artifact still there: %v", err)
	}
	for _, id := range ids[1:] {
		if _, rc, err := s.Open(id); err != nil {
			t.Errorf("newer artifact gone: %v", err)
		} else {
			rc.Close()
		}
	}
	if err := s.Put(&sandbox.Artifact{Name: "big", Content: make([]byte, 101)}); err == nil {
		t.Error("an artifact larger than the store was kept")
	}
}

// Expired artifacts are not served and are removed by the next sweep.
func TestExpiry(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	a := &sandbox.Artifact{Name: "a", Content: []byte("x")}
	if err := s.Put(a); err != nil {
		t.Fatal(err)
	}
	s.ttl = time.Nanosecond
	time.Sleep(time.Millisecond)
	if _, _, err := s.Open(a.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("expired artifact served: %v", err)
	}
	s.last = time.Time{}
	s.sweep(0)
	if _, err := os.Stat(filepath.Join(dir, a.ID+".bin")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("expired artifact not removed: %v", err)
	}
}
