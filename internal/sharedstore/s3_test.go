package sharedstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/s3"
	"github.com/agentbox-dev/agentbox/internal/s3/s3test"
	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

func TestMain(m *testing.M) {
	code := m.Run()
	s3test.Stop()
	os.Exit(code)
}

// forEachStore runs a test over each implementation: newStore opens another store over the same
// storage (as another node would: for S3, another client and another node's cache).
func forEachStore(t *testing.T, test func(t *testing.T, newStore func() Store)) {
	t.Run("dir", func(t *testing.T) {
		dir := t.TempDir()
		test(t, func() Store { return open(t, dir) })
	})
	t.Run("s3", func(t *testing.T) {
		srv := s3test.Shared(t)
		c := srv.Bucket(t, "cluster/one")
		test(t, func() Store {
			cc, err := s3.New(srv.Config(c.Bucket(), c.Prefix()))
			if err != nil {
				t.Fatal(err)
			}
			st, err := OpenS3(cc, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return st
		})
	})
}

// Snapshots written through one node's cache are in the bucket: another node (an empty cache)
// reads them, a blob of a file included (streamed both ways); a collection keeps what records
// name and what is young, and removes the rest once past the grace.
func TestS3Snapshots(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Shared(t)
	c := srv.Bucket(t, "snaps")
	a, err := OpenS3(c, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenS3(c, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sa, sb := a.Snapshots(), b.Snapshots()
	small, _, err := sa.Put([]byte("small blob"))
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 3<<20)
	_, _ = rand.Read(big)
	f := filepath.Join(sa.TmpDir(), "image")
	if err := os.WriteFile(f, big, 0o600); err != nil {
		t.Fatal(err)
	}
	file, n, err := sa.PutFile(f)
	if err != nil || n != int64(len(big)) {
		t.Fatalf("PutFile: %d %v", n, err)
	}
	ref, _, err := sa.PutManifest([]string{small, file}, []byte(`{"tier":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	refs, body, err := sb.Manifest(ref)
	if err != nil || len(refs) != 2 || string(body) != `{"tier":"x"}` {
		t.Fatalf("another node's read of the manifest: %v %s %v", refs, body, err)
	}
	if got, err := sb.Get(small); err != nil || string(got) != "small blob" {
		t.Fatalf("another node's read of a blob: %q %v", got, err)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	if err := sb.LinkBlob(file, dst); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, big) {
		t.Fatal("the file blob came back different")
	}
	// Reuse: a blob another node wrote, put again from this node, costs nothing new.
	if _, n, err := sb.Put([]byte("small blob")); err != nil || n != 0 {
		t.Fatalf("a reused blob: %d %v", n, err)
	}

	// Collection: a record names ref; an unnamed manifest goes once past the grace.
	orphan, _, _ := sa.PutManifest([]string{small}, nil)
	if _, err := a.Create(ctx, Record{Session: "sb_a-1", Owner: "a", Refs: []string{ref}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Collect(nil); err != nil {
		t.Fatal(err)
	}
	fresh := snapstore.RemoteGrace
	t.Cleanup(func() { snapstore.RemoteGrace = fresh })
	snapstore.RemoteGrace = 0 // everything counts as old: only the records keep it
	c2, _ := s3.New(srv.Config(c.Bucket(), c.Prefix()))
	d, _ := OpenS3(c2, t.TempDir()) // a node whose last collection was not a moment ago
	if err := d.Collect(nil); err != nil {
		t.Fatal(err)
	}
	e, _ := OpenS3(c2, t.TempDir()) // an empty cache: what it reads comes from the bucket
	if _, _, err := e.Snapshots().Manifest(ref); err != nil {
		t.Fatalf("a manifest a record names was collected: %v", err)
	}
	if _, err := e.Snapshots().Get(small); err != nil {
		t.Fatalf("a blob a kept manifest names was collected: %v", err)
	}
	if _, _, err := e.Snapshots().Manifest(orphan); err == nil {
		t.Fatal("a manifest nothing names outlived the grace")
	}
}

// A close (Delete) and another node's claim of the same session at the same moment: exactly one
// wins. Either the session is gone and the claim failed (no node holds an epoch of it), or the
// claimer owns it at the next epoch and the close was fenced. A name closed can be created again
// (a volume made anew).
func TestCloseAndClaimAtOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, newStore func() Store) {
		ctx := context.Background()
		a, b := newStore(), newStore()
		closed, claimed := 0, 0
		for i := range 12 {
			id := fmt.Sprintf("sb_a-%016x", i)
			if _, err := a.Create(ctx, Record{Session: id, Owner: "a"}); err != nil {
				t.Fatal(err)
			}
			var derr, cerr error
			var won Record
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); derr = a.Delete(ctx, id, 1) }()
			go func() { defer wg.Done(); won, cerr = b.Claim(ctx, id, 1, "b", "") }()
			wg.Wait()
			cur, gerr := b.Get(ctx, id)
			switch {
			case derr == nil && cerr == nil:
				t.Fatalf("%s: both the close and the claim won", id)
			case derr == nil:
				closed++
				if !errors.Is(gerr, ErrNotFound) {
					t.Fatalf("%s: closed, yet Get = %+v, %v", id, cur, gerr)
				}
				if _, err := b.Claim(ctx, id, 1, "b", ""); err == nil {
					t.Fatalf("%s: a late claim of a closed session won", id)
				}
			case cerr == nil:
				claimed++
				if !errors.Is(derr, ErrFenced) || gerr != nil || cur.Owner != "b" || cur.Epoch != 2 || won.Epoch != 2 {
					t.Fatalf("%s: claimed, yet close %v and Get %+v %v", id, derr, cur, gerr)
				}
			default:
				t.Fatalf("%s: neither won: close %v, claim %v", id, derr, cerr)
			}
		}
		t.Logf("closed first %d times, claimed first %d times", closed, claimed)
		// Made again after a close.
		id := "sb_a-00000000000000ff"
		if _, err := a.Create(ctx, Record{Session: id, Owner: "a"}); err != nil {
			t.Fatal(err)
		}
		if err := a.Delete(ctx, id, 1); err != nil {
			t.Fatal(err)
		}
		rec, err := b.Create(ctx, Record{Session: id, Owner: "b"})
		if err != nil {
			t.Fatalf("create after a close: %v", err)
		}
		if got, err := a.Get(ctx, id); err != nil || got.Owner != "b" || got.Epoch != rec.Epoch {
			t.Fatalf("after the new create: %+v %v", got, err)
		}
		if list, err := a.List(ctx); err != nil || len(list) != 1+claimed {
			t.Fatalf("List: %d records (%v), want %d", len(list), err, 1+claimed)
		}
	})
}
