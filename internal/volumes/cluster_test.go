package volumes_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/dirtar"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/sharedstore"
	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/agentbox-dev/agentbox/internal/volumes"
)

// clusterNode is node's volumes over the shared store.
func clusterNode(t *testing.T, shared *sharedstore.Dir, node string) *volumes.Store {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireTool(t, "mkfs.ext4")
	s, err := volumes.Open(t.TempDir(), volumes.Options{Cluster: &volumes.Cluster{Records: shared.Volumes(), Sessions: shared,
		Snapshots: shared.Snapshots(), Node: node, Addr: "http://" + node}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A cluster's volumes: a volume made on one node is the cluster's (listed, read and mounted on
// another, with the files the last holder left); a read-write lease is one session's across
// nodes (another session's mount is a conflict on every node, the files API too) until it ends
// or its session is gone; a session that moved takes its own lease again on its new node, and the
// old node's late release changes nothing; another tenant sees none of it on any node.
func TestClusterVolumes(t *testing.T) {
	shared, err := sharedstore.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, b := clusterNode(t, shared, "na"), clusterNode(t, shared, "nb")
	ctx := context.Background()
	session := func(id string) {
		if _, err := shared.Create(ctx, sharedstore.Record{Session: id, Owner: "na"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Create("acme", "data", 4<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create("acme", "data", 4<<20); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("the same name on another node: %v", err)
	}
	if vs := b.List("acme"); len(vs) != 1 || vs[0].Name != "data" || vs[0].QuotaBytes != 4<<20 {
		t.Fatalf("node b's list: %+v", vs)
	}

	// Another tenant, on either node: nothing.
	for _, n := range []*volumes.Store{a, b} {
		if vs := n.List("other"); len(vs) != 0 {
			t.Fatalf("another tenant's list: %+v", vs)
		}
		if _, err := n.Get("other", "data"); sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Fatalf("another tenant's get: %v", err)
		}
		if _, _, err := n.AttachFor("sb_x", "other", "data", false); sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Fatalf("another tenant's attach: %v", err)
		}
		if _, err := n.ReadFile("other", "data", "a.txt"); sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Fatalf("another tenant's read: %v", err)
		}
		if err := n.Delete("other", "data"); sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Fatalf("another tenant's delete: %v", err)
		}
	}

	// Session s1 holds it read-write on node a.
	session("s1")
	mnt, release, err := a.AttachFor("s1", "acme", "data", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "a.txt"), []byte("from s1 on a"), 0o644); err != nil {
		t.Fatal(err)
	}
	session("s2")
	if _, _, err := b.AttachFor("s2", "acme", "data", false); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("a second writer on node b: %v", err)
	}
	if _, _, err := b.AttachFor("s2", "acme", "data", true); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("a reader on node b beside the writer: %v", err)
	}
	if err := b.WriteFile("acme", "data", "x", []byte("x")); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("the files API on node b while held: %v", err)
	}
	if err := b.Delete("acme", "data"); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("delete on node b while held: %v", err)
	}
	if v, err := b.Get("acme", "data"); err != nil || v.MountedRW != 1 {
		t.Fatalf("node b's view while held: %+v %v", v, err)
	}
	release()

	// Readers are the cluster's too: a reader on node a keeps a writer (and the files API) on
	// node b out until it lets go; readers on both nodes at once are fine.
	session("r1")
	session("r2")
	_, rel1, err := a.AttachFor("r1", "acme", "data", true)
	if err != nil {
		t.Fatal(err)
	}
	_, rel2, err := b.AttachFor("r2", "acme", "data", true)
	if err != nil {
		t.Fatalf("a second reader on another node: %v", err)
	}
	if v, err := b.Get("acme", "data"); err != nil || v.MountedRO != 2 {
		t.Fatalf("readers on two nodes: %+v %v", v, err)
	}
	rel2()
	if _, _, err := b.AttachFor("s2", "acme", "data", false); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("a writer on node b beside a reader on node a: %v", err)
	}
	if err := b.WriteFile("acme", "data", "x", []byte("x")); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("the files API on node b beside a reader on node a: %v", err)
	}
	if err := b.Delete("acme", "data"); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("delete on node b beside a reader on node a: %v", err)
	}
	rel1()

	// Node b: the files API reads what s1 left, writes a new content; node a reads that.
	if got, err := b.ReadFile("acme", "data", "a.txt"); err != nil || string(got) != "from s1 on a" {
		t.Fatalf("node b reads %q %v", got, err)
	}
	if err := b.WriteFile("acme", "data", "b.txt", []byte("from the API on b")); err != nil {
		t.Fatal(err)
	}
	if got, err := a.ReadFile("acme", "data", "b.txt"); err != nil || string(got) != "from the API on b" {
		t.Fatalf("node a reads %q %v", got, err)
	}

	// s2 takes it on node b; node b dies holding it (no release). s2 moves to node a: it takes
	// its own lease again there; another session cannot.
	mnt, _, err = b.AttachFor("s2", "acme", "data", false)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "a.txt")); err != nil || string(got) != "from s1 on a" {
		t.Fatalf("s2's mount: %q %v", got, err)
	}
	session("s3")
	if _, _, err := a.AttachFor("s3", "acme", "data", false); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("another session while s2's node is gone: %v", err)
	}
	mnt, release, err = a.AttachFor("s2", "acme", "data", false)
	if err != nil {
		t.Fatalf("s2 moved to node a: %v", err)
	}
	os.WriteFile(filepath.Join(mnt, "c.txt"), []byte("s2 on a"), 0o644)
	release()
	// Node b comes back and lets go of its stale lease: fenced, nothing changes.
	b.Close()
	if got, err := a.ReadFile("acme", "data", "c.txt"); err != nil || string(got) != "s2 on a" {
		t.Fatalf("after node b's late release: %q %v", got, err)
	}

	// A holder whose session is gone (closed, or never durable on a dead node) holds nothing.
	_, gone, err := a.AttachFor("s9", "acme", "data", false) // s9 has no record
	if err != nil {
		t.Fatal(err)
	}
	b2 := clusterNode(t, shared, "nb")
	_, release, err = b2.AttachFor("s3", "acme", "data", false)
	if err != nil {
		t.Fatalf("a lease whose session has no record: %v", err)
	}
	os.WriteFile(filepath.Join(mnt, "late.txt"), []byte("s9's late write"), 0o644)
	gone() // fenced: s3 holds it now
	release()
	if _, err := a.ReadFile("acme", "data", "late.txt"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Fatalf("a fenced holder's files became the content: %v", err)
	}
	if err := b2.Delete("acme", "data"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Get("acme", "data"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Fatalf("after delete on b: %v", err)
	}
	// A new volume of the same name is another one: node a's old copy is not its content.
	if _, err := b2.Create("acme", "data", 4<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ReadFile("acme", "data", "c.txt"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Fatalf("the new volume on node a holds the old one's file: %v", err)
	}
	// A node's copies of volumes deleted elsewhere go when it starts.
	dir := t.TempDir()
	c1, err := volumes.Open(dir, volumes.Options{Cluster: &volumes.Cluster{Records: shared.Volumes(), Sessions: shared, Snapshots: shared.Snapshots(), Node: "nc"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c1.ReadFile("acme", "data", "c.txt"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Fatal(err)
	}
	c1.Close()
	if err := b2.Delete("acme", "data"); err != nil {
		t.Fatal(err)
	}
	if ms, _ := filepath.Glob(filepath.Join(dir, "*", "*", "volume.json")); len(ms) != 1 {
		t.Fatalf("node c's copies: %v", ms)
	}
	c2, err := volumes.Open(dir, volumes.Options{Cluster: &volumes.Cluster{Records: shared.Volumes(), Sessions: shared, Snapshots: shared.Snapshots(), Node: "nc"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if ms, _ := filepath.Glob(filepath.Join(dir, "*", "*")); len(ms) != 0 {
		t.Fatalf("node c kept copies of a deleted volume: %v", ms)
	}
}

// What a holder's durable snapshot keeps of its volume becomes the volume's content: a session
// that ends where nobody gives its files back (its node died, it was closed while asleep) leaves
// the volume as at its last durable step.
func TestClusterVolumeCheckpointed(t *testing.T) {
	shared, err := sharedstore.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, b := clusterNode(t, shared, "na"), clusterNode(t, shared, "nb")
	ctx := context.Background()
	if _, err := a.Create("acme", "data", 4<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := shared.Create(ctx, sharedstore.Record{Session: "s1", Owner: "na"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.AttachFor("s1", "acme", "data", false); err != nil {
		t.Fatal(err)
	}
	// The step's files, as package heavy stores them.
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "ck.txt"), []byte("at the durable step"), 0o644)
	f, _ := os.CreateTemp(shared.Snapshots().TmpDir(), "t-*.tar")
	if _, err := dirtar.Write(src, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	d, _, err := shared.Snapshots().PutFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	ref, _, err := shared.Snapshots().PutManifest([]string{d}, []byte(`{"kind":"volume-content/1"}`))
	if err != nil {
		t.Fatal(err)
	}
	b.Checkpointed("s1", "acme", map[string]string{"data": ref}) // not its holder's node: nothing
	a.Checkpointed("s2", "acme", map[string]string{"data": ref}) // not its holder: nothing
	if _, err := b.ReadFile("acme", "data", "ck.txt"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Fatalf("a content from another than the holder was taken: %v", err)
	}
	a.Checkpointed("s1", "acme", map[string]string{"data": ref})
	// Node a dies; s1 is closed (its record goes) without giving the volume back.
	a.Close()
	rec, _ := shared.Get(ctx, "s1")
	if err := shared.Delete(ctx, "s1", rec.Epoch); err != nil {
		t.Fatal(err)
	}
	mnt, release, err := b.AttachFor("s3", "acme", "data", false)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if got, err := os.ReadFile(filepath.Join(mnt, "ck.txt")); err != nil || string(got) != "at the durable step" {
		t.Fatalf("the volume after its holder ended: %q %v", got, err)
	}
}
