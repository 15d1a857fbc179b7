package s3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/s3"
	"github.com/agentbox-dev/agentbox/internal/s3/s3test"
)

func TestMain(m *testing.M) {
	code := m.Run()
	s3test.Stop()
	os.Exit(code)
}

// The client against a real S3-compatible server (SeaweedFS): signed reads, writes, listings
// and deletes, and the conditional writes the shared store's fencing rests on.
func TestObjects(t *testing.T) {
	ctx := context.Background()
	c := s3test.Shared(t).Bucket(t, "some/prefix")
	if _, _, err := c.GetBytes(ctx, "nothing"); !errors.Is(err, s3.ErrNotFound) {
		t.Fatalf("get of a missing key: %v", err)
	}
	etag, err := c.PutBytes(ctx, "a/one", []byte("first"), s3.PutOptions{IfNoneMatch: true})
	if err != nil || etag == "" {
		t.Fatalf("create: %q %v", etag, err)
	}
	if _, err := c.PutBytes(ctx, "a/one", []byte("second"), s3.PutOptions{IfNoneMatch: true}); !errors.Is(err, s3.ErrPrecondition) {
		t.Fatalf("a second create-if-absent of the same key: %v", err)
	}
	if _, err := c.PutBytes(ctx, "a/one", []byte("third"), s3.PutOptions{IfMatch: `"0123456789abcdef0123456789abcdef"`}); !errors.Is(err, s3.ErrPrecondition) {
		t.Fatalf("a write conditional on a wrong ETag: %v", err)
	}
	etag2, err := c.PutBytes(ctx, "a/one", []byte("fourth"), s3.PutOptions{IfMatch: etag})
	if err != nil {
		t.Fatalf("a write conditional on the right ETag: %v", err)
	}
	if _, err := c.PutBytes(ctx, "a/one", []byte("fifth"), s3.PutOptions{IfMatch: etag}); !errors.Is(err, s3.ErrPrecondition) {
		t.Fatalf("a write conditional on the ETag before the last write: %v", err)
	}
	b, o, err := c.GetBytes(ctx, "a/one")
	if err != nil || string(b) != "fourth" || o.ETag != etag2 {
		t.Fatalf("get: %q %+v %v (want ETag %s)", b, o, err, etag2)
	}
	// Keys with characters SigV4 escapes.
	odd := "b/a key+with=odd&chars~(1)"
	if _, err := c.PutBytes(ctx, odd, []byte("x"), s3.PutOptions{}); err != nil {
		t.Fatalf("put of %q: %v", odd, err)
	}
	if b, _, err := c.GetBytes(ctx, odd); err != nil || string(b) != "x" {
		t.Fatalf("get of %q: %q %v", odd, b, err)
	}
	var keys []string
	if _, err := c.List(ctx, "", func(o s3.Object) error { keys = append(keys, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0] != "a/one" || keys[1] != odd {
		t.Fatalf("listing: %q", keys)
	}
	if err := c.Delete(ctx, "a/one"); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "a/one"); err != nil {
		t.Fatalf("delete of a missing key: %v", err)
	}
	if _, _, err := c.Head(ctx, "a/one"); !errors.Is(err, s3.ErrNotFound) {
		t.Fatalf("head after delete: %v", err)
	}
	// A client with a wrong secret is refused: the server checks the signatures.
	srv := s3test.Shared(t)
	cfg := srv.Config(c.Bucket(), "")
	cfg.SecretKey = "wrong"
	bad, _ := s3.New(cfg)
	if _, _, err := bad.GetBytes(ctx, "some/prefix/"+odd); err == nil || errors.Is(err, s3.ErrNotFound) {
		t.Fatalf("a request signed with a wrong secret: %v", err)
	}
}

// Of many create-if-absent writes of one key at once, exactly one wins.
func TestCreateIfAbsentOneWinner(t *testing.T) {
	ctx := context.Background()
	c := s3test.Shared(t).Bucket(t, "")
	for round := range 10 {
		key := "race/" + string(rune('a'+round))
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := c.PutBytes(ctx, key, []byte{byte(i)}, s3.PutOptions{IfNoneMatch: true})
				if err == nil {
					mu.Lock()
					wins++
					mu.Unlock()
				} else if !errors.Is(err, s3.ErrPrecondition) {
					t.Errorf("a losing create: %v", err)
				}
			}()
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("round %d: %d creates won", round, wins)
		}
	}
}

// Files upload streamed: one PUT below the part size, a multipart upload (parts sent a few at
// once) above it; what comes back, whole or by ranges into a file, is what went up.
func TestPutFile(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Shared(t)
	c0 := srv.Bucket(t, "")
	cfg := srv.Config(c0.Bucket(), "files")
	cfg.PartSize = 5 << 20
	c, err := s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{0, 1 << 10, 5 << 20, 10 << 20, 12<<20 + 3} {
		data := make([]byte, size)
		_, _ = rand.Read(data)
		p := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		key := "f" + hex.EncodeToString(sum[:4])
		if err := c.PutFile(ctx, key, p, hex.EncodeToString(sum[:])); err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		body, o, err := c.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(body)
		body.Close()
		if !bytes.Equal(got, data) || o.Size != int64(size) {
			t.Fatalf("%d bytes: got %d back (size %d)", size, len(got), o.Size)
		}
		// Down again into a file: ranged GETs of a part each beyond the part size.
		f, err := os.Create(filepath.Join(t.TempDir(), "back"))
		if err != nil {
			t.Fatal(err)
		}
		n, err := c.GetFile(ctx, key, f)
		f.Close()
		back, _ := os.ReadFile(f.Name())
		if err != nil || n != int64(size) || !bytes.Equal(back, data) {
			t.Fatalf("%d bytes: GetFile wrote %d (%v), equal %v", size, n, err, bytes.Equal(back, data))
		}
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "none"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := c.GetFile(ctx, "no-such-key", f); !errors.Is(err, s3.ErrNotFound) {
		t.Fatalf("GetFile of a missing object: %v, want ErrNotFound", err)
	}
}
