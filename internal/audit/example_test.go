package audit_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox-dev/agentbox/internal/audit"
)

// Editing one byte of the audit log makes Verify fail, naming the record.
func ExampleVerify() {
	dir, _ := os.MkdirTemp("", "audit-example-")
	defer os.RemoveAll(dir)
	t := time.Date(2026, 11, 22, 8, 40, 0, 0, time.UTC)
	clock := func() time.Time { t = t.Add(time.Second); return t }
	l, err := audit.Open(dir, audit.Options{Now: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	for i := range 20 {
		l.Append(context.Background(), audit.Record{Kind: audit.KindRun, Decision: "allow",
			Run: &audit.Run{CodeSHA256: fmt.Sprintf("%064x", i), Tier: "nano", Outcome: "ok"}})
	}
	l.Close()
	r, _ := audit.Verify(context.Background(), dir, "")
	fmt.Println(r)

	// Someone edits one byte: record 17's outcome "ok" becomes "oK".
	path := filepath.Join(dir, audit.RecordsFile)
	b, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(b, []byte("\n"))
	i := bytes.Index(lines[17], []byte(`"ok"`))
	lines[17][i+2] = 'K'
	os.WriteFile(path, bytes.Join(lines, nil), 0o600)

	r, _ = audit.Verify(context.Background(), dir, "")
	fmt.Println(r.First().Message)
	// Output:
	// 20 records, 1 checkpoints, last signed at 2026-11-22T08:40:21Z (size 20); ok
	// record 17 (line 18) was altered: its content does not match its hash, and the checkpoint at size 20 signed 2026-11-22T08:40:21Z does not match
}
