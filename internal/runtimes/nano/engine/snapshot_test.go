package engine

import (
	"errors"
	"strings"
	"testing"
)

// TestSnapshotRestore: a session's state taken out of one interpreter and laid into a pristine
// one is the whole session: variables, modules, files, random state, a memory that grew; the
// monotonic clock goes on from where it was. The interpreter it came from is untouched.
func TestSnapshotRestore(t *testing.T) {
	from := newInstance(t)
	runIn(t, from, &Request{KeepGlobals: true, Code: strings.Join([]string{
		"import fractions, random, time, os",
		"x = fractions.Fraction(1, 3)",
		"big = bytearray(64 << 20)  # grows the memory past the pristine size",
		"big[-1] = 7",
		"random.seed(7)",
		"os.makedirs('/home/user/d/e', exist_ok=True)",
		"open('/home/user/d/e/f.txt', 'w').write('kept')",
		"t0 = time.monotonic()",
	}, "\n")})
	blob, err := from.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot: %d KiB", len(blob)>>10)
	check := "print(x * 3, big[-1], random.random(), open('/home/user/d/e/f.txt').read(), time.monotonic() >= t0)"
	want := runIn(t, from, &Request{KeepGlobals: true, Code: check}).Stdout

	to := newInstance(t)
	if !to.Pristine() {
		t.Fatal("a new instance is not pristine")
	}
	if err := to.Restore(blob); err != nil {
		t.Fatal(err)
	}
	if got := runIn(t, to, &Request{KeepGlobals: true, Code: check}).Stdout; got != want || !strings.HasSuffix(got, "kept True\n") {
		t.Errorf("restored session printed %q, the original %q", got, want)
	}
	if to.Pristine() {
		t.Error("a restored instance that ran still says pristine")
	}
	if err := to.Restore(blob); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("restore into a used instance: %v", err)
	}
	if err := newInstance(t).Restore([]byte("not a snapshot")); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("restore of garbage: %v", err)
	}
}

// TestSnapshotRefusals: a session whose state is more than memory, files and clock stays put.
func TestSnapshotRefusals(t *testing.T) {
	inst := newInstance(t)
	runIn(t, inst, &Request{KeepGlobals: true, Code: "f = open('/tmp/open.txt', 'w')"})
	if _, err := inst.Snapshot(); !errors.Is(err, ErrNoSnapshot) || !strings.Contains(err.Error(), "files open") {
		t.Errorf("snapshot with a file left open: %v", err)
	}
	runIn(t, inst, &Request{KeepGlobals: true, Code: "f.close()"})
	if _, err := inst.Snapshot(); err != nil {
		t.Errorf("snapshot once the file is closed: %v", err)
	}
}

// BenchmarkSnapshot times taking a small session's snapshot and restoring it into a pristine
// interpreter, and reports the snapshot's size.
func BenchmarkSnapshot(b *testing.B) {
	inst := newInstance(b)
	runIn(b, inst, &Request{KeepGlobals: true, Code: "import json\nx = [i * i for i in range(1000)]\nprint(json.dumps(x[:3]))"})
	var blob []byte
	b.Run("take", func(b *testing.B) {
		for b.Loop() {
			var err error
			if blob, err = inst.Snapshot(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(blob))/1024, "KiB")
	})
	b.Run("restore", func(b *testing.B) {
		to := newInstance(b)
		for b.Loop() {
			if err := to.Reset(); err != nil {
				b.Fatal(err)
			}
			if err := to.Restore(blob); err != nil {
				b.Fatal(err)
			}
		}
	})
}
