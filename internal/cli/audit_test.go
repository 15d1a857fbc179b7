package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/audit"
	"github.com/agentbox-dev/agentbox/internal/cli"
)

// auditLog writes a small log: 10 runs, 2 of them refused, then a session's create and close.
func auditLog(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "audit")
	l, err := audit.Open(dir, audit.Options{Logger: slog.New(slog.DiscardHandler), CheckpointRecords: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 10 {
		d := "allow"
		if i%5 == 4 {
			d = "deny"
		}
		l.Append(ctx, audit.Record{Kind: audit.KindRun, Decision: d, Run: &audit.Run{CodeSHA256: fmt.Sprintf("%064x", i),
			Tier: "nano", Reasons: []string{"nano: imports only json (all in nano)"}, Outcome: "ok"}})
	}
	l.Append(ctx, audit.Record{Kind: audit.KindSessionCreate, Session: "sb_1", Decision: "allow", Lifecycle: &audit.Lifecycle{Tier: "nano"}})
	l.Append(ctx, audit.Record{Kind: audit.KindSessionClose, Session: "sb_1", Lifecycle: &audit.Lifecycle{Tier: "nano", Reason: "closed by request", Runs: 3}})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func auditCLI(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := cli.Main(context.Background(), append([]string{"audit"}, args...), strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestAuditVerifyCommand(t *testing.T) {
	t.Parallel()
	dir := auditLog(t)
	code, out, errOut := auditCLI("verify", "--dir", dir)
	if code != 0 || !strings.HasPrefix(out, "12 records, 3 checkpoints, last signed at ") || !strings.HasSuffix(out, "(size 12); ok\n") {
		t.Fatalf("intact log: exit %d\n%s%s", code, out, errOut)
	}

	// One byte of record 6 changes: exit 1, naming it.
	path := filepath.Join(dir, audit.RecordsFile)
	b, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(b, []byte("\n"))
	lines[6] = bytes.Replace(lines[6], []byte(`"outcome":"ok"`), []byte(`"outcome":"oK"`), 1)
	os.WriteFile(path, bytes.Join(lines, nil), 0o600)
	code, out, _ = auditCLI("verify", "--dir", dir)
	want := "FAILED: record 6 (line 7) was altered: its content does not match its hash, and the checkpoint at size 8 signed"
	if code != 1 || !strings.Contains(out, want) {
		t.Fatalf("altered log: exit %d\n%s\nwant %q", code, out, want)
	}

	// A public key kept elsewhere that is not the log's: every checkpoint is refused.
	other := auditLog(t)
	code, out, _ = auditCLI("verify", "--dir", other, "--pub", filepath.Join(dir, audit.PubFile))
	if code != 1 || !strings.Contains(out, "FAILED: checkpoint 0 (line 1 of audit.checkpoints): it is not signed by agentbox-audit+") ||
		!strings.Contains(out, "also: checkpoint 2") {
		t.Fatalf("other key: exit %d\n%s", code, out)
	}

	if code, _, errOut := auditCLI("verify", "--dir", filepath.Join(t.TempDir(), "none")); code != 1 || !strings.Contains(errOut, "agentbox audit verify:") {
		t.Errorf("no log: exit %d %s", code, errOut)
	}
	if code, _, _ := auditCLI("verify", "extra"); code != 2 {
		t.Errorf("extra argument: exit %d", code)
	}
	if code, _, _ := auditCLI("frobnicate"); code != 2 {
		t.Errorf("unknown subcommand: exit %d", code)
	}
}

func TestAuditQueryCommand(t *testing.T) {
	t.Parallel()
	dir := auditLog(t)
	code, out, errOut := auditCLI("query", "--dir", dir, "--decision", "deny")
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(out, "nano ok exit 0") || !strings.Contains(out, "(nano: imports only json (all in nano))") {
		t.Fatalf("deny: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = auditCLI("query", "--dir", dir, "--session", "sb_1", "--json")
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(out, `"kind":"session.close"`) || !strings.Contains(out, `"reason":"closed by request"`) {
		t.Fatalf("session as JSON: exit %d\n%s", code, out)
	}
	code, out, _ = auditCLI("query", "--dir", dir, "--kind", "run", "--limit", "2", "--since", "1h")
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(out, "\n8 ") || !strings.Contains(out, "\n9 ") {
		t.Fatalf("last two runs: exit %d\n%s", code, out)
	}
	if code, out, _ := auditCLI("query", "--dir", dir, "--until", "1h"); code != 0 || out != "no records match\n" {
		t.Fatalf("until an hour ago: exit %d %q", code, out)
	}
	if code, _, _ := auditCLI("query", "--since", "yesterday"); code != 2 {
		t.Errorf("bad --since: exit %d", code)
	}
	if code, _, errOut := auditCLI("query", "--dir", dir, "--limit", "5000"); code != 1 || !strings.Contains(errOut, "maximum") {
		t.Errorf("limit over the maximum: exit %d %s", code, errOut)
	}
}
