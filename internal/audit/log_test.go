package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

var quiet = slog.New(slog.DiscardHandler)

// clock is a fixed clock that advances a millisecond per reading.
func clock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 11, 22, 8, 40, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Millisecond)
		return t
	}
}

func testOptions() Options {
	return Options{CheckpointRecords: 256, CheckpointInterval: time.Hour, Logger: quiet, Now: clock()}
}

// sample is record i of a test log: runs, sessions and egress in turn.
func sample(i int) Record {
	sess := fmt.Sprintf("sb_%04d", i/10)
	switch i % 4 {
	case 0:
		return Record{Kind: KindSessionCreate, Session: sess, Decision: "allow", Lifecycle: &Lifecycle{Tier: "nano"}}
	case 1:
		return Record{Kind: KindRun, Session: sess, Decision: "allow", Run: &Run{
			CodeSHA256: fmt.Sprintf("%064x", i), CodeBytes: 12, Tier: "nano",
			Reasons: []string{"nano: imports only json (all in nano)"}, Outcome: "ok",
			Limits: &Limits{TimeoutMS: 30000, MemoryBytes: 256 << 20}, DurationMS: 3.25}}
	case 2:
		return Record{Kind: KindEgress, Session: sess, Decision: "deny", Egress: &Egress{
			Method: "POST", URL: "https://example.com/upload", Decision: "deny", Rules: []string{"deny-all"},
			Detectors: []string{"aws-access-key"}, Headers: map[string]string{"Authorization": "Bearer abc"},
			BodyExcerpt: "key=[REDACTED:aws-access-key]"}}
	default:
		return Record{Kind: KindRun, Decision: "deny", Run: &Run{CodeSHA256: fmt.Sprintf("%064x", i),
			Outcome: "error", ErrorKind: "invalid_request", Error: "code is empty"}}
	}
}

// writeLog makes a log of n records in a new directory and closes it.
func writeLog(t testing.TB, n int, opts Options) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "audit")
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := l.Append(context.Background(), sample(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func verify(t testing.TB, dir string) *Report {
	t.Helper()
	r, err := Verify(context.Background(), dir, "")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func readLines(t testing.TB, dir string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, RecordsFile))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.SplitAfter(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

func writeLines(t testing.TB, dir string, lines [][]byte) {
	t.Helper()
	var b []byte
	for _, l := range lines {
		b = append(b, l...)
		if !bytes.HasSuffix(l, []byte("\n")) {
			b = append(b, '\n')
		}
	}
	if err := os.WriteFile(filepath.Join(dir, RecordsFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// copyDir copies a log directory, so one log serves many tamperings.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "audit")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// rehash rewrites lines[from:] so that every hash and prev is right again: what an attacker who
// knows the format but not the signing key can do.
func rehash(t testing.TB, lines [][]byte, from int) {
	t.Helper()
	prev := ""
	if from > 0 {
		var h head
		if err := json.Unmarshal(lines[from-1], &h); err != nil {
			t.Fatal(err)
		}
		prev = h.Hash
	}
	for i := from; i < len(lines); i++ {
		var r Record
		if err := json.Unmarshal(lines[i], &r); err != nil {
			t.Fatal(err)
		}
		r.Prev, r.Hash = prev, ""
		line, hash, err := encodeLine(&r)
		if err != nil {
			t.Fatal(err)
		}
		lines[i], prev = append(line, '\n'), hash
	}
}

func TestFrontierMatchesTlog(t *testing.T) {
	t.Parallel()
	var all []tlog.Hash // every stored hash, as a full hash store would keep them
	read := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = all[x]
		}
		return out, nil
	})
	var f frontier
	for n := int64(0); n < 1100; n++ {
		data := fmt.Appendf(nil, "record %d", n)
		hs, err := tlog.StoredHashes(n, data, read)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, hs...)
		if err := f.add(data); err != nil {
			t.Fatal(err)
		}
		want, err := tlog.TreeHash(n+1, read)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := f.root(); err != nil || got != want {
			t.Fatalf("size %d: root %v %v, want %v", n+1, got, err, want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	opts := testOptions()
	opts.CheckpointRecords = 100
	dir := writeLog(t, 1000, opts)
	r := verify(t, dir)
	if !r.OK() || r.Records != 1000 || r.Checkpoints != 10 || r.Last == nil || r.Last.Size != 1000 || r.Unsigned != 0 {
		t.Fatalf("report: %+v", r)
	}
	if !strings.HasPrefix(r.String(), "1000 records, 10 checkpoints, last signed at 2026-11-22T08:40:01Z (size 1000); ok") {
		t.Errorf("summary %q", r.String())
	}
	// Reopen and go on: the chain and the tree continue.
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Opened().OK() || l.Records() != 1000 {
		t.Fatalf("reopen: %v, %d records", l.Opened(), l.Records())
	}
	for i := range 50 {
		if err := l.Append(context.Background(), sample(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if r := verify(t, dir); !r.OK() || r.Records != 1050 || r.Checkpoints != 11 {
		t.Fatalf("after reopen: %v", r)
	}
	// Every line is a record with its seq, a UTC time and the kind-specific object.
	lines := readLines(t, dir)
	var rec Record
	if err := json.Unmarshal(lines[1], &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Seq != 1 || rec.Kind != KindRun || rec.Run == nil || rec.Run.Reasons[0] == "" || rec.Time.Location() != time.UTC {
		t.Errorf("record 1: %+v", rec)
	}
	if !bytes.Contains(lines[1], []byte(`"time":"2026-11-22T08:40:00.`)) {
		t.Errorf("time is not UTC RFC 3339: %s", lines[1])
	}
	for _, name := range []string{RecordsFile, CheckpointsFile, KeyFile} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", name, fi.Mode(), err)
		}
	}
	pub, err := ReadPub(filepath.Join(dir, PubFile))
	if err != nil || !strings.HasPrefix(pub, keyName+"+") {
		t.Errorf("public key %q %v", pub, err)
	}
}

// TestOneByte flips every byte of one record in turn (and some of the first and the last
// record): each time Verify names that record.
func TestOneByte(t *testing.T) {
	t.Parallel()
	base := writeLog(t, 300, testOptions()) // checkpoints at 256 and 300
	for _, k := range []int{0, 17, 299} {
		lines := readLines(t, base)
		orig := bytes.Clone(lines[k])
		dir := copyDir(t, base)
		step := 1 // every byte of record 17, every 7th of the first and the last
		if k != 17 {
			step = 7
		}
		for off := 0; off < len(orig)-1; off += step {
			mod := bytes.Clone(orig)
			mod[off] ^= 0x01
			lines[k] = mod
			writeLines(t, dir, lines)
			r := verify(t, dir)
			want := fmt.Sprintf("record %d (line %d) was altered", k, k+1)
			if r.OK() || r.First().Record != int64(k) || !strings.HasPrefix(r.First().Message, want) {
				t.Fatalf("record %d, byte %d (%q→%q): first problem %+v, want %q", k, off, orig[off], mod[off], r.First(), want)
			}
			if !strings.Contains(r.First().Message, "checkpoint at size") {
				t.Fatalf("record %d, byte %d: %q does not name the checkpoint", k, off, r.First().Message)
			}
		}
	}
	lines := readLines(t, base)
	dir := copyDir(t, base)
	lines[17] = bytes.Replace(lines[17], []byte(`"outcome":"ok"`), []byte(`"outcome":"OK"`), 1)
	writeLines(t, dir, lines)
	want := "record 17 (line 18) was altered: its content does not match its hash, and the checkpoint at size 256 signed 2026-11-22T08:40:00Z does not match"
	if got := verify(t, dir).First().Message; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestTampering(t *testing.T) {
	t.Parallel()
	base := writeLog(t, 600, testOptions())
	for _, tc := range []struct {
		name   string
		edit   func(t *testing.T, dir string, lines [][]byte) [][]byte
		record int64
		want   string
	}{
		{"delete a line", func(t *testing.T, dir string, lines [][]byte) [][]byte {
			return append(lines[:40:40], lines[41:]...)
		}, 40, "record 40 is missing: line 41 holds record 41, and the checkpoint at size 256"},
		{"delete three lines", func(t *testing.T, dir string, lines [][]byte) [][]byte {
			return append(lines[:300:300], lines[303:]...)
		}, 300, "records 300 to 302 are missing: line 301 holds record 303, and the checkpoint at size 512"},
		{"delete the first line", func(t *testing.T, dir string, lines [][]byte) [][]byte {
			return lines[1:]
		}, 0, "record 0 is missing"},
		{"delete the last line", func(t *testing.T, dir string, lines [][]byte) [][]byte {
			return lines[:599]
		}, 599, "the log was truncated: it holds 599 records, but the checkpoint at size 600 signed 2026-11-22T08:40:00Z covers 600 (record 599 is missing)"},
		{"truncate", func(t *testing.T, dir string, lines [][]byte) [][]byte {
			return lines[:300]
		}, 300, "the log was truncated: it holds 300 records, but the checkpoint at size 600 signed 2026-11-22T08:40:00Z covers 600 (records 300 to 599 are missing)"},
		{"swap two lines", func(t *testing.T, dir string, lines [][]byte) [][]byte {
			lines[70], lines[71] = lines[71], lines[70]
			return lines
		}, 70, "records 70 and 71 are out of order: line 71 holds record 71 and line 72 holds record 70"},
		{"duplicate a line", func(t *testing.T, dir string, lines [][]byte) [][]byte {
			return append(lines[:101:101], lines[100:]...)
		}, 101, "record 101 (line 102) is out of place: it says it is record 100"},
		{"rewrite one record with its hash", func(t *testing.T, dir string, lines [][]byte) [][]byte {
			lines[90] = bytes.Replace(lines[90], []byte(`"decision":"deny"`), []byte(`"decision":"allow"`), 1)
			keep := bytes.Clone(lines[91])
			rehash(t, lines[:91], 90)
			lines[91] = keep
			return lines
		}, 90, "record 90 (line 91) was altered and its hash recomputed: record 91's prev does not match it"},
		{"rewrite one record and the whole chain after it", func(t *testing.T, dir string, lines [][]byte) [][]byte {
			lines[300] = bytes.Replace(lines[300], []byte(`"tier":"nano"`), []byte(`"tier":"heavy"`), 1)
			rehash(t, lines, 300)
			return lines
		}, 256, "a record among 256 to 511 (lines 257 to 512) was altered, with its hash and the chain recomputed: the checkpoint at size 512 signed"},
		{"forge a checkpoint", func(t *testing.T, dir string, lines [][]byte) [][]byte {
			editCheckpoints(t, dir, func(cps [][]byte) [][]byte {
				cps[1] = bytes.Replace(cps[1], []byte("\\n512\\n"), []byte("\\n511\\n"), 1)
				return cps
			})
			return lines
		}, -1, "checkpoint 1 (line 2 of audit.checkpoints): its signature does not verify"},
		{"edit a checkpoint's plain size", func(t *testing.T, dir string, lines [][]byte) [][]byte {
			editCheckpoints(t, dir, func(cps [][]byte) [][]byte {
				cps[0] = bytes.Replace(cps[0], []byte(`"size":256`), []byte(`"size":255`), 1)
				return cps
			})
			return lines
		}, -1, "checkpoint 0 (line 1 of audit.checkpoints): its plain fields (size 255"},
		{"sign with another key", func(t *testing.T, dir string, lines [][]byte) [][]byte {
			other := writeLog(t, 1, testOptions())
			for _, f := range []string{KeyFile, PubFile} {
				b, _ := os.ReadFile(filepath.Join(other, f))
				os.WriteFile(filepath.Join(dir, f), b, 0o600)
			}
			return lines
		}, -1, "checkpoint 0 (line 1 of audit.checkpoints): it is not signed by agentbox-audit+"},
		{"cut a signed record short", func(t *testing.T, dir string, lines [][]byte) [][]byte {
			writeLines(t, dir, lines[:599])
			f, _ := os.OpenFile(filepath.Join(dir, RecordsFile), os.O_APPEND|os.O_WRONLY, 0)
			f.Write(lines[599][:40])
			f.Close()
			return nil
		}, 599, "record 599 (line 600) was cut short (40 bytes without a newline), and the checkpoint at size 600"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := copyDir(t, base)
			if lines := tc.edit(t, dir, readLines(t, base)); lines != nil {
				writeLines(t, dir, lines)
			}
			r := verify(t, dir)
			if r.OK() {
				t.Fatalf("verify passed: %v", r)
			}
			if p := r.First(); p.Record != tc.record || !strings.HasPrefix(p.Message, tc.want) {
				t.Fatalf("first problem %+v\nwant record %d: %q...", p, tc.record, tc.want)
			}
		})
	}
}

func editCheckpoints(t *testing.T, dir string, edit func([][]byte) [][]byte) {
	t.Helper()
	path := filepath.Join(dir, CheckpointsFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	cps := edit(lines[:len(lines)-1]) // each with its newline
	if err := os.WriteFile(path, bytes.Join(cps, nil), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTornLastLine: a daemon killed mid-write leaves a line without its newline. Verify warns;
// Open cuts it and says so in a log.repair record; the log verifies cleanly afterwards.
func TestTornLastLine(t *testing.T) {
	t.Parallel()
	opts := testOptions()
	dir := writeLog(t, 10, opts)
	f, err := os.OpenFile(filepath.Join(dir, RecordsFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := []byte(`{"seq":10,"time":"2026-11-22T08:41:00Z","kind":"run","run":{"code_sha`)
	f.Write(torn)
	f.Close()
	r := verify(t, dir)
	if !r.OK() || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "line 11 is incomplete") {
		t.Fatalf("torn line: %v %q", r, r.Warnings)
	}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(context.Background(), sample(1)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	r = verify(t, dir)
	if !r.OK() || len(r.Warnings) != 0 || r.Records != 12 {
		t.Fatalf("after repair: %v %q", r, r.Warnings)
	}
	var rep Record
	json.Unmarshal(readLines(t, dir)[10], &rep)
	if rep.Kind != KindRepair || rep.Repair.Line != 11 || rep.Repair.Bytes != int64(len(torn)) || rep.Repair.Excerpt != string(torn) {
		t.Fatalf("repair record %+v %+v", rep, rep.Repair)
	}
}

// TestOpenReportsTampering: a daemon that finds its log altered keeps going, records an alert,
// and the alteration stays visible.
func TestOpenReportsTampering(t *testing.T) {
	t.Parallel()
	opts := testOptions()
	dir := writeLog(t, 300, opts)
	lines := readLines(t, dir)
	lines[5] = bytes.Replace(lines[5], []byte(`"allow"`), []byte(`"deny"`), 1)
	writeLines(t, dir, lines)
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if l.Opened().OK() || l.Opened().First().Record != 5 {
		t.Fatalf("open report %v", l.Opened())
	}
	l.Append(context.Background(), sample(2))
	l.Close()
	recs, err := QueryFile(context.Background(), filepath.Join(dir, RecordsFile), Filter{Kind: "alert"})
	if err != nil || len(recs) != 1 || !strings.Contains(string(recs[0]), "record 5 (line 6) was altered") {
		t.Fatalf("alert records %s %v", recs, err)
	}
	if r := verify(t, dir); r.OK() || r.First().Record != 5 || len(r.Problems) != 1 {
		t.Fatalf("verify after reopen: %v", r.Problems)
	}
}

func TestConcurrentAppend(t *testing.T) {
	t.Parallel()
	opts := testOptions()
	opts.CheckpointRecords = 64
	opts.Now = nil
	dir := filepath.Join(t.TempDir(), "audit")
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 250 {
				if err := l.Append(context.Background(), sample(g*1000+i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	// Queries run while records are appended and see only complete records.
	for range 20 {
		if _, err := l.Query(context.Background(), Filter{Kind: "run", Limit: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if r := verify(t, dir); !r.OK() || r.Records != 2000 || r.Checkpoints != 2000/64+1 {
		t.Fatalf("%v (%d checkpoints)", r, r.Checkpoints)
	}
}

func TestOneProcessAtATime(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "audit")
	l, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := Open(dir, testOptions()); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second open: %v", err)
	}
}

func TestCheckpointInterval(t *testing.T) {
	t.Parallel()
	opts := testOptions()
	opts.CheckpointInterval = 20 * time.Millisecond
	dir := filepath.Join(t.TempDir(), "audit")
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Append(context.Background(), sample(1))
	deadline := time.Now().Add(5 * time.Second)
	for {
		if r := verify(t, dir); r.Checkpoints == 1 && r.Unsigned == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint 5 s after a record, with a 20 ms interval")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestEgressRecordsHideCredentials(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "audit")
	l, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	err = l.Append(context.Background(), Record{Kind: KindEgress, Decision: "allow", Egress: &Egress{
		Method: "GET", URL: "https://api.example.com/", Status: 200, Decision: "allow",
		Headers:     map[string]string{"Authorization": "Bearer sk-live-123", "Cookie": "sid=42", "Accept": "*/*"},
		BodyExcerpt: strings.Repeat("x", 5000)}})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	line := readLines(t, dir)[0]
	for _, secret := range []string{"sk-live-123", "sid=42"} {
		if bytes.Contains(line, []byte(secret)) {
			t.Errorf("record holds %q: %s", secret, line)
		}
	}
	var r Record
	json.Unmarshal(line, &r)
	if r.Egress.Headers["Authorization"] != "Bearer [REDACTED]" || r.Egress.Headers["Accept"] != "*/*" || len(r.Egress.BodyExcerpt) > MaxExcerpt+3 {
		t.Errorf("egress %+v", r.Egress)
	}
}

func TestQuery(t *testing.T) {
	t.Parallel()
	dir := writeLog(t, 400, testOptions())
	path := filepath.Join(dir, RecordsFile)
	at := func(i int) time.Time { // record i's time: the clock ticks once per record and checkpoint
		var r Record
		json.Unmarshal(readLines(t, dir)[i], &r)
		return r.Time
	}
	for _, tc := range []struct {
		name  string
		f     Filter
		count int
		first int64
	}{
		{"default limit: the most recent 100", Filter{}, 100, 300},
		{"session", Filter{Session: "sb_0012"}, 8, 120},
		{"kind prefix", Filter{Kind: "session", Limit: 1000}, 100, 0},
		{"kind exact", Filter{Kind: "run", Limit: 1000}, 200, 1},
		{"decision", Filter{Decision: "deny", Limit: 5}, 5, 391},
		{"since and until", Filter{Since: at(10), Until: at(20), Limit: 1000}, 10, 10},
		{"all filters", Filter{Session: "sb_0001", Kind: "egress", Decision: "deny"}, 3, 10},
		{"nothing", Filter{Session: "sb_9999"}, 0, 0},
	} {
		recs, err := QueryFile(context.Background(), path, tc.f)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(recs) != tc.count {
			t.Errorf("%s: %d records, want %d", tc.name, len(recs), tc.count)
			continue
		}
		if tc.count > 0 {
			var r Record
			json.Unmarshal(recs[0], &r)
			if r.Seq != tc.first {
				t.Errorf("%s: first record %d, want %d", tc.name, r.Seq, tc.first)
			}
		}
	}
	if _, err := QueryFile(context.Background(), path, Filter{Limit: MaxQueryLimit + 1}); err == nil {
		t.Error("a limit above the maximum was accepted")
	}
}

// TestTornCheckpoint: a checkpoint cut short by a crash is ignored by Verify (with a warning)
// and cut by Open, which signs the records again.
func TestTornCheckpoint(t *testing.T) {
	t.Parallel()
	opts := testOptions()
	dir := writeLog(t, 10, opts)
	editCheckpoints(t, dir, func(cps [][]byte) [][]byte {
		return append(cps, []byte(`{"size":11,"root":"abc`))
	})
	if r := verify(t, dir); !r.OK() || r.Checkpoints != 1 || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "checkpoint cut short") {
		t.Fatalf("torn checkpoint: %v %q", r, r.Warnings)
	}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	l.Append(context.Background(), sample(3))
	l.Close()
	if r := verify(t, dir); !r.OK() || r.Checkpoints != 2 || len(r.Warnings) != 0 || r.Records != 11 {
		t.Fatalf("after open: %v %q", r, r.Warnings)
	}
}
