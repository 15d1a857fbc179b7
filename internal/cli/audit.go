package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentbox-dev/agentbox/internal/audit"
)

// AuditOptions are the flags of `agentbox audit verify|query`. Both read the log's files
// directly: no daemon is needed, and a running one does not stand in the way.
type AuditOptions struct {
	// Dir is the audit directory. Empty: the configuration's (DATA_DIR/audit).
	Dir        string
	ConfigFile string
	DataDir    string
	// Pub is the public key file verify checks the checkpoints with. Empty: DIR/signing.pub.
	Pub string
	// Filter selects the records query prints.
	Filter audit.Filter
	// JSON makes query print the records as they are stored, one per line.
	JSON bool
	Out  io.Writer
	// Now is the clock relative --since and --until count back from. Default time.Now.
	Now func() time.Time
}

// maxListed bounds the problems verify lists after the first.
const maxListed = 20

func (o AuditOptions) dir() (string, error) {
	if o.Dir != "" {
		return o.Dir, nil
	}
	cfg, err := loadConfig(o.ConfigFile, "", o.DataDir)
	if err != nil {
		return "", err
	}
	return cfg.AuditDir(), nil
}

// AuditVerify checks the whole log and prints a summary: "N records, M checkpoints, last signed
// at T (size S); ok", or the same with "FAILED:" and the first altered or missing record,
// followed by the other problems. It reports whether the log is intact.
func AuditVerify(ctx context.Context, opts AuditOptions) (bool, error) {
	dir, err := opts.dir()
	if err != nil {
		return false, err
	}
	var vkey string
	if opts.Pub != "" {
		if vkey, err = audit.ReadPub(opts.Pub); err != nil {
			return false, err
		}
	}
	r, err := audit.Verify(ctx, dir, vkey)
	if err != nil {
		return false, err
	}
	fmt.Fprintln(opts.Out, r)
	for i, p := range r.Problems {
		if i == 0 {
			continue
		}
		if i > maxListed {
			fmt.Fprintf(opts.Out, "  ... and %d more\n", len(r.Problems)-i+r.Omitted)
			break
		}
		fmt.Fprintf(opts.Out, "  also: %s\n", p.Message)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(opts.Out, "warning: %s\n", w)
	}
	return r.OK(), nil
}

// AuditQuery prints the most recent records that match opts.Filter, oldest first: a table, or
// with JSON the stored lines.
func AuditQuery(ctx context.Context, opts AuditOptions) error {
	dir, err := opts.dir()
	if err != nil {
		return err
	}
	recs, err := audit.QueryFile(ctx, filepath.Join(dir, audit.RecordsFile), opts.Filter)
	if err != nil {
		return err
	}
	if opts.JSON {
		for _, r := range recs {
			fmt.Fprintf(opts.Out, "%s\n", r)
		}
		return nil
	}
	if len(recs) == 0 {
		fmt.Fprintln(opts.Out, "no records match")
		return nil
	}
	tw := tabwriter.NewWriter(opts.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tKIND\tSESSION\tWHO\tDECISION\tDETAIL")
	for _, raw := range recs {
		var r audit.Record
		if err := json.Unmarshal(raw, &r); err != nil {
			fmt.Fprintf(tw, "?\t\t\t\t\t\tunreadable record: %v\n", err)
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Seq, r.Time.Format("2006-01-02T15:04:05.000Z"), r.Kind,
			dash(r.Session), dash(who(r.Tenant, r.Agent)), dash(r.Decision), detail(r))
	}
	return tw.Flush()
}

// who says who asked: "acme/ci-bot", "acme", or "" for the daemon's own tenant.
func who(tenant, agent string) string {
	if agent == "" {
		return tenant
	}
	return tenant + "/" + agent
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// detail says what a record is about in one line.
func detail(r audit.Record) string {
	switch {
	case r.Run != nil:
		x := r.Run
		out := []string{x.Tier, x.Outcome}
		switch {
		case x.Exception != "":
			out = append(out, x.Exception)
		case x.ErrorKind != "":
			out = append(out, x.ErrorKind)
		}
		out = append(out, fmt.Sprintf("exit %d, %.1f ms, code %.12s", x.ExitCode, x.DurationMS, x.CodeSHA256))
		if len(x.Reasons) > 0 {
			out = append(out, "("+strings.Join(x.Reasons, "; ")+")")
		}
		return strings.Join(out, " ")
	case r.Lifecycle != nil:
		x := r.Lifecycle
		out := x.Tier
		if x.Reason != "" {
			out += ", " + x.Reason
		}
		if x.Runs > 0 {
			out += fmt.Sprintf(", %d runs", x.Runs)
		}
		if x.ErrorKind != "" {
			out += ", " + x.ErrorKind + ": " + x.Error
		}
		return out
	case r.Egress != nil:
		x := r.Egress
		out := fmt.Sprintf("%s %s -> %d %s", x.Method, x.URL, x.Status, x.Decision)
		if len(x.Rules) > 0 {
			out += " rules " + strings.Join(x.Rules, ",")
		}
		if len(x.Detectors) > 0 {
			out += " detectors " + strings.Join(x.Detectors, ",")
		}
		return out
	case r.Policy != nil:
		return r.Policy.Summary
	case r.Alert != nil:
		return r.Alert.Message
	case r.Repair != nil:
		return fmt.Sprintf("cut %d bytes at line %d: %s", r.Repair.Bytes, r.Repair.Line, r.Repair.Reason)
	case r.Restart != nil:
		ids := make([]string, len(r.Restart.Sessions))
		for i, s := range r.Restart.Sessions {
			ids[i] = s.ID
		}
		return fmt.Sprintf("the daemon (pid %d, started %s) stopped without shutting down; %d sessions lost %s",
			r.Restart.PreviousPID, r.Restart.PreviousStart.Format(time.RFC3339), len(ids), strings.Join(ids, " "))
	}
	return ""
}

// timeFlag reads an RFC 3339 time, or a duration meaning that long ago ("1h", "30m").
type timeFlag struct {
	t   *time.Time
	now func() time.Time
}

func (f timeFlag) String() string {
	if f.t == nil || f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f timeFlag) Set(s string) error {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		*f.t = t
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("want an RFC 3339 time (2026-11-22T08:40:00Z) or how long ago (1h, 30m)")
	}
	*f.t = f.now().Add(-d)
	return nil
}

func auditCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	synopsis := `Usage: agentbox audit verify [flags]
       agentbox audit query [flags]

The daemon records every session, run (with its code's SHA-256, routing reasons, limits and
outcome), egress request and policy change in DATA_DIR/audit/audit.jsonl, with Ed25519-signed
checkpoints of a Merkle tree over the records in audit.checkpoints.

verify checks the whole log: every record's hash and link to the one before, every checkpoint's
signature and root. It prints "N records, M checkpoints, last signed at T; ok" and exits 0, or
names the first altered or missing record and exits 1. Records after the last checkpoint are
vouched for by the hash chain only. Check against a copy of signing.pub kept elsewhere (--pub):
the one beside the log proves little to someone who could replace both.

query prints the most recent records that match every filter given, oldest first.`
	if len(args) == 0 || (args[0] != "verify" && args[0] != "query") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprintln(stdout, synopsis)
			return exitOK
		}
		fmt.Fprintln(stderr, synopsis)
		return exitUsage
	}
	sub := args[0]
	opts := AuditOptions{Out: stdout, Now: time.Now}
	fs := newFlagSet("audit "+sub, synopsis, stderr)
	fs.StringVar(&opts.Dir, "dir", "", "audit `DIR`ectory (default DATA_DIR/audit, or audit.dir of the configuration)")
	fs.StringVar(&opts.DataDir, "data-dir", "", "data `DIR` (default $AGENTBOX_DATA_DIR or ~/.cache/agentbox)")
	fs.StringVar(&opts.ConfigFile, "config", "", "daemon configuration `FILE` (JSON)")
	if sub == "verify" {
		fs.StringVar(&opts.Pub, "pub", "", "public key `FILE` to check the checkpoints with (default DIR/signing.pub)")
	} else {
		f := &opts.Filter
		fs.StringVar(&f.Session, "session", "", "only records of session `ID`")
		fs.StringVar(&f.Kind, "kind", "", "only records of `KIND`: run, egress, policy.change, alert, session (all session.*), session.create, ...")
		fs.StringVar(&f.Decision, "decision", "", "only records with `DECISION` (allow, deny, ...)")
		fs.StringVar(&f.Tenant, "tenant", "", "only records of `TENANT` (who asked)")
		fs.StringVar(&f.Agent, "agent", "", "only records of `AGENT` (the agent an API key names)")
		fs.Var(timeFlag{&f.Since, opts.Now}, "since", "only records at or after `T`: RFC 3339, or how long ago (1h)")
		fs.Var(timeFlag{&f.Until, opts.Now}, "until", "only records before `T`: RFC 3339, or how long ago")
		fs.IntVar(&f.Limit, "limit", audit.DefaultQueryLimit, fmt.Sprintf("print the most recent `N` matches (at most %d)", audit.MaxQueryLimit))
		fs.BoolVar(&opts.JSON, "json", false, "print the records as stored, one JSON object per line")
	}
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "agentbox audit %s: unexpected argument %q\n", sub, pos[0])
		return exitUsage
	}
	if sub == "verify" {
		ok, err := AuditVerify(ctx, opts)
		switch {
		case err != nil:
			fmt.Fprintf(stderr, "agentbox audit verify: %v\n", err)
			return exitFailure
		case !ok:
			return exitFailure
		}
		return exitOK
	}
	if err := AuditQuery(ctx, opts); err != nil {
		fmt.Fprintf(stderr, "agentbox audit query: %v\n", err)
		return exitFailure
	}
	return exitOK
}
