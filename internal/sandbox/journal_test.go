package sandbox_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// crashCopy is what a kill -9 of the daemon right now would leave of its records directory:
// its files as they are (writes not yet synced survive the process, not the machine).
func crashCopy(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func journalLines(t *testing.T, dir, id string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, id+".journal"))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte{'\n'})
}

// A rewind that was answered survives a kill -9 right after it, and so do the steps that ran
// after it (their branch included): the daemon that starts on what the dead one left brings
// the session back at the head it had, with every step. A rewind appends one small entry to
// the session's journal; it does not rewrite the session's record.
func TestRecordJournalSurvivesKill(t *testing.T) {
	tier := &counterTier{durable: map[string]int{}}
	dir := t.TempDir()
	m := counterManager(t, tier, dir, sandbox.Retention{})
	v := m.As(sandbox.Caller{Tenant: "acme"})
	info, err := v.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	id := info.ID
	var steps []string
	for _, d := range []int{1, 10, 100, 1000} {
		steps = append(steps, addRun(t, v, id, d).Step)
	}
	waitDurable(t, v, id)
	record, err := os.ReadFile(filepath.Join(dir, id+".json"))
	if err != nil {
		t.Fatal(err)
	}
	lines := journalLines(t, dir, id)
	if _, err := v.Rewind(context.Background(), id, steps[1]); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, id+".json")); !bytes.Equal(got, record) {
		t.Errorf("a rewind rewrote the session's whole record")
	}
	if n := journalLines(t, dir, id); n != lines+1 {
		t.Errorf("a rewind added %d entries to the journal, want 1", n-lines)
	}
	afterRewind := crashCopy(t, dir)

	// A branch from the rewound step, then a kill -9.
	branch := addRun(t, v, id, 5).Step
	waitDurable(t, v, id)
	afterBranch := crashCopy(t, dir)

	for _, c := range []struct {
		name, dir, head string
		steps           int
		next            string
	}{
		{"after the rewind", afterRewind, steps[1], 4, "12\n"},
		{"after a step on the branch", afterBranch, branch, 5, "17\n"},
	} {
		m2 := counterManager(t, tier, c.dir, sandbox.Retention{})
		v2 := m2.As(sandbox.Caller{Tenant: "acme"})
		list, head, err := v2.Steps(id)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if head != c.head || len(list) != c.steps {
			t.Errorf("%s: head %s with %d steps, want %s with %d", c.name, head, len(list), c.head, c.steps)
		}
		for _, st := range list {
			if st.Snapshot.State != sandbox.SnapshotDurable {
				t.Errorf("%s: step %s's snapshot %s, want durable", c.name, st.ID, st.Snapshot.State)
			}
		}
		if got := addRun(t, v2, id, 1).Stdout; got != c.next {
			t.Errorf("%s: the next run printed %q, want %q", c.name, got, c.next)
		}
		m2.Close()
	}
}

// A journal whose last entry is torn (the daemon killed while writing it) loads without it, and
// the session goes on from the entry before; an entry appended after the repair is read back.
func TestRecordJournalTornLine(t *testing.T) {
	tier := &counterTier{durable: map[string]int{}}
	dir := t.TempDir()
	m := counterManager(t, tier, dir, sandbox.Retention{})
	v := m.As(sandbox.Caller{Tenant: "acme"})
	info, err := v.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	id := info.ID
	first := addRun(t, v, id, 1).Step
	second := addRun(t, v, id, 2).Step
	waitDurable(t, v, id)
	if _, err := v.Rewind(context.Background(), id, first); err != nil {
		t.Fatal(err)
	}
	crashed := crashCopy(t, dir)
	m.Close()

	// The rewind's entry, cut in the middle; and, for a second daemon, a whole line of garbage.
	jf := filepath.Join(crashed, id+".journal")
	b, err := os.ReadFile(jf)
	if err != nil {
		t.Fatal(err)
	}
	last := bytes.LastIndexByte(b[:len(b)-1], '\n')
	torn := b[:last+1+(len(b)-last)/2]
	if err := os.WriteFile(jf, torn, 0o600); err != nil {
		t.Fatal(err)
	}
	m2 := counterManager(t, tier, crashed, sandbox.Retention{})
	v2 := m2.As(sandbox.Caller{Tenant: "acme"})
	list, head, err := v2.Steps(id)
	if err != nil || head != second || len(list) != 2 {
		t.Fatalf("after a torn rewind entry: head %s (want %s, the head before it), %d steps, %v", head, second, len(list), err)
	}
	if _, err := os.Stat(jf); !os.IsNotExist(err) {
		t.Errorf("the journal was not folded into the record on start: %v", err)
	}
	if _, err := v2.Rewind(context.Background(), id, first); err != nil {
		t.Fatal(err)
	}
	if n := journalLines(t, crashed, id); n != 1 {
		t.Errorf("the journal after the repair and a rewind holds %d entries, want 1", n)
	}
	again := crashCopy(t, crashed)
	m2.Close()
	f, err := os.OpenFile(filepath.Join(again, id+".journal"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("{not json\n{\"seq\": 99, \"info\": {\"id\": \"" + id + "\"}, \"head\": \"nope\"}\n")
	f.Close()
	m3 := counterManager(t, tier, again, sandbox.Retention{})
	v3 := m3.As(sandbox.Caller{Tenant: "acme"})
	if _, head, err := v3.Steps(id); err != nil || head != first {
		t.Fatalf("after a line that does not parse: head %s, want %s (%v)", head, first, err)
	}
	if got := addRun(t, v3, id, 1).Stdout; got != "2\n" {
		t.Errorf("the session after the repairs printed %q, want 2", got)
	}
}

// Many changes compact the journal into the record now and then: it stays bounded, and the
// record read back has every step.
func TestRecordJournalCompacts(t *testing.T) {
	tier := &counterTier{durable: map[string]int{}}
	dir := t.TempDir()
	m := counterManager(t, tier, dir, sandbox.Retention{StepsPerSession: 1000})
	v := m.As(sandbox.Caller{Tenant: "acme"})
	info, err := v.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	id := info.ID
	big := strings.Repeat("x", 2000)
	for i := 0; i < 120; i++ {
		if _, err := v.RunInSession(context.Background(), id, &sandbox.RunRequest{Code: "add 1 # " + big}); err != nil {
			t.Fatal(err)
		}
	}
	waitDurable(t, v, id)
	st, err := os.Stat(filepath.Join(dir, id+".journal"))
	rec, rerr := os.Stat(filepath.Join(dir, id+".json"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	if err == nil && st.Size() > 2*rec.Size()+128<<10 {
		t.Errorf("journal %d bytes beside a record of %d: not compacted", st.Size(), rec.Size())
	}
	m2 := counterManager(t, tier, crashCopy(t, dir), sandbox.Retention{StepsPerSession: 1000})
	list, _, err := m2.As(sandbox.Caller{Tenant: "acme"}).Steps(id)
	if err != nil || len(list) != 120 {
		t.Fatalf("steps read back: %d, %v", len(list), err)
	}
}
