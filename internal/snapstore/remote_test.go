package snapstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// memRemote is a fake Remote for the cache's own logic (the real one, over S3, is tested against
// a real server in package sharedstore).
type memRemote struct {
	mu      sync.Mutex
	objs    map[string][]byte
	written map[string]time.Time
	uploads int
	corrupt bool
	// fetches counts Fetch calls by kind/digest; hold, when set, makes blob fetches wait for
	// it to close.
	fetches map[string]int
	hold    chan struct{}
}

func newMem() *memRemote {
	return &memRemote{objs: map[string][]byte{}, written: map[string]time.Time{}}
}

func (m *memRemote) Upload(_ context.Context, kind, d, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objs[kind+"/"+d], m.written[kind+"/"+d] = b, time.Now()
	m.uploads++
	return nil
}

func (m *memRemote) Fetch(_ context.Context, kind, d string, w *os.File) error {
	m.mu.Lock()
	b, ok := m.objs[kind+"/"+d]
	if m.fetches == nil {
		m.fetches = map[string]int{}
	}
	m.fetches[kind+"/"+d]++
	hold := m.hold
	m.mu.Unlock()
	if hold != nil && kind == "blobs" {
		<-hold
	}
	if !ok {
		return fmt.Errorf("fake: %w", ErrNotFound)
	}
	if m.corrupt {
		b = append([]byte("x"), b...)
	}
	_, err := io.Copy(w, bytes.NewReader(b))
	return err
}

func (m *memRemote) Age(_ context.Context, kind, d string) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.written[kind+"/"+d]
	if !ok {
		return 0, fmt.Errorf("fake: %w", ErrNotFound)
	}
	return time.Since(at), nil
}

func (m *memRemote) List(_ context.Context, kind string, fn func(string, time.Duration) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, at := range m.written {
		if len(k) > len(kind) && k[:len(kind)+1] == kind+"/" {
			if err := fn(k[len(kind)+1:], time.Since(at)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (m *memRemote) Delete(_ context.Context, kind, d string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, kind+"/"+d)
	delete(m.written, kind+"/"+d)
	return nil
}

func (m *memRemote) age(key string, by time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.written[key] = m.written[key].Add(-by)
}

// A write through the cache is on the remote before it returns; a reuse of a blob whose remote
// copy grew old (or vanished) writes it again; a read the cache misses comes from the remote,
// and a corrupt one is refused.
func TestCacheOverRemote(t *testing.T) {
	rem := newMem()
	a, err := OpenCache(t.TempDir(), rem)
	if err != nil {
		t.Fatal(err)
	}
	d, n, err := a.Put([]byte("blob"))
	if err != nil || n != 4 || rem.uploads != 1 {
		t.Fatalf("put: %d bytes, %d uploads, %v", n, rem.uploads, err)
	}
	// A reuse just after: nothing to do.
	if _, _, err := a.Put([]byte("blob")); err != nil || rem.uploads != 1 {
		t.Fatalf("a fresh reuse uploaded again (%d) %v", rem.uploads, err)
	}
	// Its remote copy old and this process's memory of it stale: written again.
	rem.age("blobs/"+d, RemoteGrace)
	a.remote.mu.Lock()
	a.remote.kept = map[string]time.Time{}
	a.remote.mu.Unlock()
	if _, _, err := a.Put([]byte("blob")); err != nil || rem.uploads != 2 {
		t.Fatalf("a reuse of an old remote copy: %d uploads, %v", rem.uploads, err)
	}
	// Gone from the remote (collected elsewhere): written again.
	_ = rem.Delete(context.Background(), "blobs", d)
	a.remote.mu.Lock()
	a.remote.kept = map[string]time.Time{}
	a.remote.mu.Unlock()
	if _, _, err := a.Put([]byte("blob")); err != nil || rem.uploads != 3 || rem.objs["blobs/"+d] == nil {
		t.Fatalf("a reuse of a blob the remote lost: %d uploads, %v", rem.uploads, err)
	}
	m, _, err := a.PutManifest([]string{d}, []byte("body"))
	if err != nil {
		t.Fatal(err)
	}
	// Another machine's cache reads both from the remote.
	b, _ := OpenCache(t.TempDir(), rem)
	if refs, body, err := b.Manifest(m); err != nil || refs[0] != d || string(body) != "body" {
		t.Fatalf("manifest from the remote: %v %q %v", refs, body, err)
	}
	if got, err := b.Get(d); err != nil || string(got) != "blob" {
		t.Fatalf("blob from the remote: %q %v", got, err)
	}
	if _, err := b.Get(Digest([]byte("never written"))); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a blob nowhere: %v", err)
	}
	rem.corrupt = true
	c, _ := OpenCache(t.TempDir(), rem)
	if _, err := c.Get(d); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("a corrupt fetch: %v", err)
	}
}

// A node fetches ahead a snapshot it may restore: the manifest and its blobs come into its cache,
// once; a restore that needs a blob while it is being fetched ahead waits for that transfer
// instead of starting another.
func TestPrefetch(t *testing.T) {
	rem := newMem()
	a, _ := OpenCache(t.TempDir(), rem)
	d1, _, _ := a.Put([]byte("pages"))
	d2, _, _ := a.Put([]byte("state"))
	m, _, err := a.PutManifest([]string{d1, d2}, []byte("body"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := OpenCache(t.TempDir(), rem)
	n, err := b.Prefetch(m)
	if err != nil || n != int64(len("pages")+len("state")) {
		t.Fatalf("prefetch: %d bytes, %v", n, err)
	}
	if n, err := b.Prefetch(m); err != nil || n != 0 {
		t.Fatalf("a second prefetch fetched %d bytes (%v)", n, err)
	}
	if err := b.LinkBlob(d1, filepath.Join(t.TempDir(), "pages.img")); err != nil {
		t.Fatal(err)
	}
	if f := rem.fetches; f["blobs/"+d1] != 1 || f["blobs/"+d2] != 1 || f["manifests/"+m] != 1 {
		t.Fatalf("fetches: %v (each object once)", f)
	}
	if n, err := a.Prefetch(m); err != nil || n != 0 {
		t.Fatalf("the writer's own cache: %d bytes fetched (%v)", n, err)
	}

	// A restore meets the prefetch half way.
	rem.mu.Lock()
	rem.hold, rem.fetches = make(chan struct{}), nil
	rem.mu.Unlock()
	c, _ := OpenCache(t.TempDir(), rem)
	done := make(chan error, 2)
	go func() { _, err := c.Prefetch(m); done <- err }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		rem.mu.Lock()
		started := rem.fetches["blobs/"+d1] > 0
		rem.mu.Unlock()
		if started {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the prefetch did not start")
		}
	}
	go func() { done <- c.LinkBlob(d1, filepath.Join(t.TempDir(), "pages.img")) }()
	time.Sleep(20 * time.Millisecond)
	close(rem.hold)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if f := rem.fetches["blobs/"+d1]; f != 1 {
		t.Fatalf("the blob was fetched %d times, want once", f)
	}
}
