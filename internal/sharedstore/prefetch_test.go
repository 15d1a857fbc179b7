package sharedstore

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/s3"
	"github.com/agentbox-dev/agentbox/internal/s3/s3test"
)

// A node fetches ahead into its cache the snapshot another node's session would resume from
// (its newest durable step), so that moving it there restores from the node's disk; it fetches
// nothing for its own sessions.
func TestPrefetchLatestSnapshot(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Shared(t)
	c := srv.Bucket(t, "prefetch")
	open := func() *S3 {
		cc, err := s3.New(srv.Config(c.Bucket(), c.Prefix()))
		if err != nil {
			t.Fatal(err)
		}
		st, err := OpenS3(cc, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	a, b := open(), open()
	snap := func(st *S3, content string) (manifest, blob string) {
		d, _, err := st.Snapshots().Put([]byte(content))
		if err != nil {
			t.Fatal(err)
		}
		m, _, err := st.Snapshots().PutManifest([]string{d}, []byte("{}"))
		if err != nil {
			t.Fatal(err)
		}
		return m, d
	}
	oldM, oldB := snap(a, "an older step's pages")
	newM, newB := snap(a, "the newest durable step's pages")
	record := func(id string, steps ...[2]string) []byte {
		type step struct {
			ID       string `json:"id"`
			Parent   string `json:"parent,omitempty"`
			Snapshot struct {
				State string `json:"state"`
				Ref   string `json:"ref,omitempty"`
			} `json:"snapshot"`
		}
		var v struct {
			Info struct {
				ID string `json:"id"`
			} `json:"info"`
			State string  `json:"state"`
			Head  string  `json:"head"`
			Steps []*step `json:"steps"`
		}
		v.Info.ID, v.State = id, "live"
		parent := ""
		for i, s := range steps {
			st := &step{ID: "st" + string(rune('1'+i)), Parent: parent}
			st.Snapshot.State, st.Snapshot.Ref = s[0], s[1]
			v.Steps = append(v.Steps, st)
			parent = st.ID
		}
		v.Head = parent
		out, _ := json.Marshal(v)
		return out
	}
	// a's session: an older durable step, the newest durable one, a step in memory only.
	id := "sb_a-0123456789abcdef"
	if _, err := a.Create(ctx, Record{Session: id, Owner: "a", Refs: []string{oldM, newM},
		Data: record(id, [2]string{"durable", oldM}, [2]string{"durable", newM}, [2]string{"kept", ""})}); err != nil {
		t.Fatal(err)
	}
	cached := func(st *S3, blob string) bool {
		_, err := os.Stat(filepath.Join(st.Snapshots().Dir(), "blobs", blob[:2], blob))
		return err == nil
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	pa := &prefetcher{s: a, node: "a", log: quiet, seen: map[string]string{}, owner: map[string]string{}}
	pb := &prefetcher{s: b, node: "b", log: quiet, seen: map[string]string{}, owner: map[string]string{}}
	pb.round(ctx)
	if !cached(b, newB) || cached(b, oldB) {
		t.Fatalf("b's cache after a round: newest %v (want true), older %v (want false)", cached(b, newB), cached(b, oldB))
	}
	// a's own session: a fetches nothing for it (its cache has what it wrote; a fresh cache of
	// a stays empty).
	a2 := open()
	pa.s = a2
	pa.round(ctx)
	if cached(a2, newB) {
		t.Fatal("a node fetched ahead its own session's snapshot")
	}
	// A new durable step: the next round fetches it.
	m3, b3 := snap(a, "a later step's pages")
	rec, err := a.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	rec.Data = record(id, [2]string{"durable", newM}, [2]string{"durable", m3})
	if err := a.Put(ctx, rec); err != nil {
		t.Fatal(err)
	}
	pb.round(ctx)
	if !cached(b, b3) {
		t.Fatal("b did not fetch the session's new latest snapshot")
	}
}
