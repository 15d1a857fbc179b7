package audit

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// The figures in doc.go come from these:
//
//	go test -run '^$' -bench . -benchtime 2000x ./internal/audit/   (Append, AppendSync)
//	go test -run '^$' -bench 'Verify|Open|Query' -benchtime 5x ./internal/audit/

func benchAppend(b *testing.B, sync bool) {
	opts := Options{Logger: quiet, SyncEveryRecord: sync, CheckpointInterval: time.Hour}
	l, err := Open(filepath.Join(b.TempDir(), "audit"), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := l.Append(ctx, sample(i|1)); err != nil { // run records
			b.Fatal(err)
		}
	}
}

// BenchmarkAppend: one run record, a checkpoint (fsync and signature) every 256.
func BenchmarkAppend(b *testing.B) { benchAppend(b, false) }

// BenchmarkAppendSync: the same with an fsync per record.
func BenchmarkAppendSync(b *testing.B) { benchAppend(b, true) }

// bigLog is a closed log of 1e5 records, made once per benchmark.
func bigLog(b *testing.B) string {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	return writeLog(b, 100_000, Options{Logger: quiet, CheckpointInterval: time.Hour})
}

func BenchmarkVerify1e5(b *testing.B) {
	dir := bigLog(b)
	for b.Loop() {
		if r := verify(b, dir); !r.OK() || r.Records != 100_000 {
			b.Fatal(r)
		}
	}
}

func BenchmarkOpen1e5(b *testing.B) {
	dir := bigLog(b)
	for b.Loop() {
		l, err := Open(dir, Options{Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		l.mu.Lock()
		l.signed = l.tree.n // nothing new: Close must not add a checkpoint per iteration
		l.mu.Unlock()
		l.Close()
	}
}

func BenchmarkQuery1e5(b *testing.B) {
	dir := bigLog(b)
	path := filepath.Join(dir, RecordsFile)
	for b.Loop() {
		recs, err := QueryFile(context.Background(), path, Filter{Kind: "egress", Decision: "deny"})
		if err != nil || len(recs) != DefaultQueryLimit {
			b.Fatal(len(recs), err)
		}
	}
}
