package sharedstore

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

func open(t *testing.T, dir string) *Dir {
	t.Helper()
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCreateGetPutDelete(t *testing.T) {
	forEachStore(t, testCreateGetPutDelete)
}

func testCreateGetPutDelete(t *testing.T, newStore func() Store) {
	ctx := context.Background()
	d := newStore()
	if _, err := d.Get(ctx, "sb_a-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get of an unknown session: %v", err)
	}
	r, err := d.Create(ctx, Record{Session: "sb_a-1", Owner: "a", Addr: "http://a", Data: json.RawMessage(`{"x":1}`), Refs: []string{"r1"}})
	if err != nil || r.Epoch != 1 || r.Owner != "a" {
		t.Fatalf("create: %+v %v", r, err)
	}
	if _, err := d.Create(ctx, Record{Session: "sb_a-1", Owner: "b"}); !errors.Is(err, ErrExists) {
		t.Fatalf("a second create: %v", err)
	}
	r.Data = json.RawMessage(`{"x":2}`)
	if err := d.Put(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := d.Get(ctx, "sb_a-1")
	if err != nil || string(got.Data) != `{"x":2}` {
		t.Fatalf("get after put: %s %v", got.Data, err)
	}
	bad := r
	bad.Owner = "b"
	if err := d.Put(ctx, bad); !errors.Is(err, ErrFenced) {
		t.Fatalf("a put by a node that does not own the session: %v", err)
	}
	if _, err := d.Create(ctx, Record{Session: "../x", Owner: "a"}); err == nil {
		t.Fatal("a session id with a path in it was taken")
	}
	if err := d.Delete(ctx, "sb_a-1", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get(ctx, "sb_a-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if l, _ := d.List(ctx); len(l) != 0 {
		t.Fatalf("list after delete: %+v", l)
	}
}

// TestClaimOneWinner: many nodes claim the same session from the same epoch at once, through
// stores of their own over one directory; exactly one wins, the others learn the winner.
func TestClaimOneWinner(t *testing.T) {
	forEachStore(t, testClaimOneWinner)
}

func testClaimOneWinner(t *testing.T, newStore func() Store) {
	ctx := context.Background()
	if _, err := newStore().Create(ctx, Record{Session: "sb_a-1", Owner: "a", Data: json.RawMessage(`{"head":"st_3"}`)}); err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		const n = 16
		var wg sync.WaitGroup
		wins := make(chan string, n)
		losers := make(chan Record, n)
		from := uint64(round + 1)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				node := "n" + strconv.Itoa(i)
				r, err := newStore().Claim(ctx, "sb_a-1", from, node, "http://"+node)
				if err == nil {
					if r.Owner != node || r.Epoch != from+1 || string(r.Data) != `{"head":"st_3"}` {
						t.Errorf("the winner's record: %+v", r)
					}
					wins <- node
					return
				}
				cur, ok := Current(err)
				if !ok {
					t.Errorf("a losing claim: %v", err)
					return
				}
				losers <- cur
			}()
		}
		wg.Wait()
		close(wins)
		close(losers)
		var won []string
		for w := range wins {
			won = append(won, w)
		}
		if len(won) != 1 {
			t.Fatalf("round %d: %d claims won: %v", round, len(won), won)
		}
		for l := range losers {
			if l.Owner != won[0] || l.Epoch != from+1 {
				t.Fatalf("round %d: a loser was told %s@%d, the winner is %s@%d", round, l.Owner, l.Epoch, won[0], from+1)
			}
		}
	}
}

// TestFencing: a node that comes back after its session was claimed can neither overwrite the
// record nor delete it, and claiming from a stale epoch fails.
func TestFencing(t *testing.T) {
	forEachStore(t, testFencing)
}

func testFencing(t *testing.T, newStore func() Store) {
	ctx := context.Background()
	d := newStore()
	a, err := d.Create(ctx, Record{Session: "sb_a-1", Owner: "a", Data: json.RawMessage(`"a1"`)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Claim(ctx, "sb_a-1", a.Epoch, "b", "http://b")
	if err != nil {
		t.Fatal(err)
	}
	a.Data = json.RawMessage(`"a2 (stale)"`)
	err = d.Put(ctx, a)
	if cur, ok := Current(err); !ok || cur.Owner != "b" {
		t.Fatalf("a stale owner's put: %v", err)
	}
	if err := d.Delete(ctx, "sb_a-1", a.Epoch); !errors.Is(err, ErrFenced) {
		t.Fatalf("a stale owner's delete: %v", err)
	}
	if _, err := d.Claim(ctx, "sb_a-1", a.Epoch, "c", "http://c"); !errors.Is(err, ErrFenced) {
		t.Fatalf("a claim from a stale epoch: %v", err)
	}
	got, _ := d.Get(ctx, "sb_a-1")
	if got.Owner != "b" || string(got.Data) != `"a1"` {
		t.Fatalf("the record after the stale writes: %+v", got)
	}
	b.Data = json.RawMessage(`"b1"`)
	if err := d.Put(ctx, b); err != nil {
		t.Fatalf("the new owner's put: %v", err)
	}
	b.Released = true
	if err := d.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.Get(ctx, "sb_a-1"); !got.Released || string(got.Data) != `"b1"` {
		t.Fatalf("after release: %+v", got)
	}
}

// TestClaimAcrossProcesses: the same race between separate processes (the test binary run
// again as a claimer), as separate nodes would run it.
func TestClaimAcrossProcesses(t *testing.T) {
	if node := os.Getenv("SHAREDSTORE_CLAIMER"); node != "" {
		d, err := OpenDir(os.Getenv("SHAREDSTORE_DIR"))
		if err != nil {
			os.Exit(3)
		}
		// Start together: wait for the start file.
		for _, err := os.Stat(filepath.Join(d.Path(), "go")); err != nil; _, err = os.Stat(filepath.Join(d.Path(), "go")) {
			time.Sleep(time.Millisecond)
		}
		if _, err := d.Claim(context.Background(), "sb_a-1", 1, node, ""); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := open(t, dir).Create(ctx, Record{Session: "sb_a-1", Owner: "a"}); err != nil {
		t.Fatal(err)
	}
	var cmds []*exec.Cmd
	for i := range 6 {
		c := exec.Command(os.Args[0], "-test.run=^TestClaimAcrossProcesses$")
		c.Env = append(os.Environ(), "SHAREDSTORE_CLAIMER=p"+strconv.Itoa(i), "SHAREDSTORE_DIR="+dir)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	time.Sleep(200 * time.Millisecond)
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wins := 0
	for _, c := range cmds {
		err := c.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
			wins++
		case errors.As(err, &ee) && ee.ExitCode() == 1:
		default:
			t.Fatalf("a claimer failed: %v", err)
		}
	}
	got, _ := open(t, dir).Get(ctx, "sb_a-1")
	if wins != 1 || got.Epoch != 2 {
		t.Fatalf("%d processes won; the record is %+v", wins, got)
	}
}

// TestCollectKeepsOtherNodesSnapshots: a node's collection keeps what another node's session
// records refer to.
func TestCollectKeepsOtherNodesSnapshots(t *testing.T) {
	ctx := context.Background()
	d := open(t, t.TempDir())
	st := d.Snapshots()
	blob := func(s string) string { b, _, _ := st.Put([]byte(s)); return b }
	mine, _, _ := st.PutManifest([]string{blob("mine")}, nil)
	theirs, _, _ := st.PutManifest([]string{blob("theirs")}, nil)
	gone, _, _ := st.PutManifest([]string{blob("gone")}, nil)
	if _, err := d.Create(ctx, Record{Session: "sb_b-1", Owner: "b", Refs: []string{theirs}}); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Minute)
	_ = filepath.Walk(filepath.Join(d.Path(), "snapshots"), func(p string, _ os.FileInfo, _ error) error {
		return os.Chtimes(p, old, old)
	})
	if err := d.Collect([]string{mine}); err != nil {
		t.Fatal(err)
	}
	for name, ref := range map[string]string{"the caller's": mine, "another node's": theirs} {
		if _, _, err := st.Manifest(ref); err != nil {
			t.Errorf("%s snapshot was collected: %v", name, err)
		}
	}
	if _, _, err := st.Manifest(gone); err == nil {
		t.Error("a snapshot nothing refers to was kept")
	}
}
