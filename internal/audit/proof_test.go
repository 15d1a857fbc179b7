package audit_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/audit"
)

// A record's inclusion proof verifies with the log's public key alone; a proof whose record was
// altered, or checked with another key, does not.
func TestProve(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := audit.Open(dir, audit.Options{Logger: slog.New(slog.DiscardHandler), CheckpointRecords: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 37 {
		if err := l.Append(ctx, audit.Record{Kind: audit.KindRun, Session: "sb_n1-" + strings.Repeat("a", i%5+1)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := audit.Prove(ctx, dir, "", 5); !errors.Is(err, audit.ErrNotSigned) {
		t.Fatalf("before a checkpoint: %v, want ErrNotSigned", err)
	}
	if err := l.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	key := l.PublicKey()
	for _, seq := range []int64{0, 1, 17, 36} {
		p, err := audit.Prove(ctx, dir, key, seq)
		if err != nil {
			t.Fatalf("record %d: %v", seq, err)
		}
		if p.Size != 37 || !strings.Contains(p.Record, `"seq":`) {
			t.Fatalf("proof %+v", p)
		}
		if err := p.Verify(key); err != nil {
			t.Fatalf("record %d: %v", seq, err)
		}
		forged := *p
		forged.Record = strings.Replace(p.Record, `"run"`, `"mcp.call"`, 1)
		if err := forged.Verify(key); err == nil {
			t.Errorf("record %d altered still verifies", seq)
		}
	}
	other := t.TempDir()
	l2, err := audit.Open(other, audit.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	p, _ := audit.Prove(ctx, dir, key, 3)
	if err := p.Verify(l2.PublicKey()); err == nil {
		t.Errorf("a proof verifies with another log's key")
	}
	if _, err := audit.Prove(ctx, dir, key, 37); !errors.Is(err, audit.ErrNotSigned) {
		t.Errorf("a record past the end: %v", err)
	}
	l.Close()
	// A log altered after it was signed does not prove itself.
	path := filepath.Join(dir, audit.RecordsFile)
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), `"seq":3,`, `"seq":3, `, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := audit.Prove(ctx, dir, key, 3); err == nil {
		t.Errorf("an altered log proved record 3")
	}
}
