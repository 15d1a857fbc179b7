package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentbox-dev/agentbox/api"
)

// SessionsOptions are the flags of `agentbox sessions` and what tests replace.
type SessionsOptions struct {
	DaemonOptions
	// Create describes a session to create.
	Create api.CreateSessionRequest
	// Run is a run in a session: its code, timeout; its ID is the session's.
	Run    api.RunRequest
	JSON   bool
	Stdout io.Writer
	Stderr io.Writer
	// Now is the clock of the table's ages. Default time.Now.
	Now func() time.Time
	// Keep closes sessions keeping their state and steps (close --keep).
	Keep bool
}

// SessionsList prints the open sessions, oldest first: id, tier, state, runs, age and idle time.
func SessionsList(ctx context.Context, opts SessionsOptions) int {
	c, err := opts.client()
	if err != nil {
		fmt.Fprintf(opts.Stderr, "agentbox sessions: %v\n", err)
		return exitUsage
	}
	ss, err := c.ListSessions(ctx)
	if err != nil {
		return apiFailure(ctx, opts.Stderr, "sessions list", err)
	}
	if opts.JSON {
		printJSON(opts.Stdout, api.SessionList{Sessions: ss})
		return exitOK
	}
	if len(ss) == 0 {
		fmt.Fprintln(opts.Stdout, "no open sessions (agentbox sessions create starts one)")
		return exitOK
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	tw := tabwriter.NewWriter(opts.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRUNTIME\tSTATE\tRUNS\tAGE\tIDLE\tNETWORK")
	for _, s := range ss {
		network := "-"
		if s.Network {
			network = "yes (" + dash(s.EgressProfile) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", s.ID, s.Runtime, dash(s.State), s.Runs,
			ago(now(), s.CreatedAt), ago(now(), s.LastUsed), network)
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(opts.Stderr, "agentbox sessions list: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// SessionsCreate starts a session and prints its id (alone on stdout, for scripts); its tier
// goes to stderr.
func SessionsCreate(ctx context.Context, opts SessionsOptions) int {
	c, err := opts.client()
	if err != nil {
		fmt.Fprintf(opts.Stderr, "agentbox sessions: %v\n", err)
		return exitUsage
	}
	s, err := c.CreateSession(ctx, opts.Create)
	if err != nil {
		return apiFailure(ctx, opts.Stderr, "sessions create", err)
	}
	if opts.JSON {
		printJSON(opts.Stdout, s)
		return exitOK
	}
	fmt.Fprintln(opts.Stdout, s.ID)
	fmt.Fprintf(opts.Stderr, "agentbox: session %s on %s; it closes after %s idle (agentbox sessions close %s)\n",
		s.ID, s.Runtime, time.Duration(s.IdleTimeout*float64(time.Second)), s.ID)
	return exitOK
}

// SessionsClose closes sessions by id; an id that is not open is reported and makes the exit
// code 66 (not found), the others are closed still.
func SessionsClose(ctx context.Context, opts SessionsOptions, ids []string) int {
	c, err := opts.client()
	if err != nil {
		fmt.Fprintf(opts.Stderr, "agentbox sessions: %v\n", err)
		return exitUsage
	}
	code := exitOK
	for _, id := range ids {
		if !opts.Keep {
			if err := c.CloseSession(ctx, id); err != nil {
				code = apiFailure(ctx, opts.Stderr, "sessions close", err)
			}
			continue
		}
		s, err := c.CloseSessionKeep(ctx, id)
		if err != nil {
			code = apiFailure(ctx, opts.Stderr, "sessions close", err)
			continue
		}
		if opts.JSON {
			printJSON(opts.Stdout, s)
			continue
		}
		until := ""
		if s.KeptUntil != nil {
			until = " until " + s.KeptUntil.Format(time.RFC3339)
		}
		fmt.Fprintf(opts.Stdout, "%s closed; its state and %d steps are kept%s (agentbox resume %s, agentbox fork %s STEP)\n", s.ID, s.Steps, until, s.ID, s.ID)
	}
	return code
}

// SessionsRun runs code in a session and prints what it printed; the exit code is the code's
// own, or that of the error as for `agentbox run`.
func SessionsRun(ctx context.Context, opts SessionsOptions, id string) int {
	c, err := opts.client()
	if err != nil {
		fmt.Fprintf(opts.Stderr, "agentbox sessions: %v\n", err)
		return exitUsage
	}
	var res *api.Result
	streamed := false
	if opts.JSON {
		res, err = c.RunInSession(ctx, id, opts.Run)
	} else {
		// The code's output goes to the terminal as it prints it, as with agentbox run.
		res, err = c.RunInSessionStream(ctx, id, opts.Run, toTerminal(opts.Stdout, opts.Stderr, &streamed, " (--json prints the whole result)"))
	}
	if err != nil {
		if r := errResult(err); r != nil && !opts.JSON && !streamed {
			io.WriteString(opts.Stdout, r.Stdout)
			io.WriteString(opts.Stderr, r.Stderr)
		}
		return apiFailure(ctx, opts.Stderr, "sessions run", err)
	}
	if opts.JSON {
		printJSON(opts.Stdout, res)
	} else if !streamed {
		io.WriteString(opts.Stdout, res.Stdout)
		io.WriteString(opts.Stderr, res.Stderr)
	}
	if res.ExitCode < 0 || res.ExitCode > 255 {
		return exitFailure
	}
	return res.ExitCode
}

// ago is a duration for people, to the second: "3m12s".
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return now.Sub(t).Round(time.Second).String()
}

func sessionsCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const synopsis = `Usage: agentbox sessions list
       agentbox sessions create [--runtime R] [--package P] [--timeout S] [--memory M] [--network]
                                [--volume NAME=/PATH[:ro]]
       agentbox sessions run ID FILE|-
       agentbox sessions close [--keep] ID...

Sessions on the daemon: one interpreter that keeps variables, imports and files from one run to
the next. create prints the new session's id; run runs a file in it (exit code as agentbox run);
close ends sessions; with --keep it writes a durable snapshot first and keeps the session's state
and steps (within the daemon's retention, 7 days by default) to resume or fork it later. The
daemon closes a session left idle past its idle timeout (10m).

Examples:
  id=$(agentbox sessions create --runtime heavy)
  echo 'x = 41' | agentbox sessions run "$id" -
  echo 'print(x + 1)' | agentbox sessions run "$id" -
  agentbox sessions close "$id"`
	if len(args) == 0 {
		fmt.Fprintln(stderr, synopsis)
		return exitUsage
	}
	sub, rest := args[0], args[1:]
	opts := SessionsOptions{Stdout: stdout, Stderr: stderr}
	var (
		timeout  secondsFlag
		memory   mebibytesFlag
		packages listFlag
	)
	fs := newFlagSet("sessions "+sub, synopsis, stderr)
	fs.StringVar(&opts.URL, "url", "", "daemon `URL` (default $AGENTBOX_URL or http://127.0.0.1:8420)")
	fs.StringVar(&opts.DataDir, "data-dir", "", "data `DIR` whose api_key file holds the key (default $AGENTBOX_DATA_DIR or ~/.cache/agentbox)")
	fs.BoolVar(&opts.JSON, "json", false, "print the answer as JSON")
	switch sub {
	case "create":
		fs.StringVar(&opts.Create.Runtime, "runtime", "", "runtime: auto (starts on nano, moves to heavy when the code needs it), nano or heavy")
		fs.Var(&packages, "package", "a Python package the code needs (picks a heavy image that has it); repeatable or comma-separated")
		fs.Var(&timeout, "timeout", "each run's wall-clock limit in `seconds` or a duration (default: the server's, 30s)")
		fs.Var(&memory, "memory", "memory limit in `MiB` or with a unit (2G) (default: the server's, 256)")
		fs.StringVar(&opts.Create.Image, "image", "", "a heavy image by name")
		fs.BoolVar(&opts.Create.Network, "network", false, "a way out through the egress gateway (heavy only)")
		fs.StringVar(&opts.Create.EgressProfile, "egress-profile", "", "the egress profile (default: the daemon's)")
		opts.Create.Volumes = map[string]string{}
		fs.Var(volumeFlag(opts.Create.Volumes), "volume", "mount a volume (agentbox volumes): `NAME=/PATH`, or NAME=/PATH:ro read-only; repeatable (heavy)")
	case "run":
		fs.Var(&timeout, "timeout", "this run's wall-clock limit in `seconds` or a duration (default: the session's)")
	case "close":
		fs.BoolVar(&opts.Keep, "keep", false, "keep the session's state and steps (a durable snapshot) to resume or fork it later, within the daemon's retention")
	case "list":
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, synopsis)
		return exitOK
	default:
		fmt.Fprintf(stderr, "agentbox sessions: unknown subcommand %q\n\n%s\n", sub, synopsis)
		return exitUsage
	}
	pos, err := parseInterleaved(fs, rest)
	if err != nil {
		return flagExit(err)
	}
	opts.Create.Timeout, opts.Create.MemoryMB, opts.Create.Packages = float64(timeout), int64(memory), packages
	if len(opts.Create.Volumes) == 0 {
		opts.Create.Volumes = nil
	}
	opts.Run.Timeout = float64(timeout)
	want := map[string]string{"list": "no arguments", "create": "no arguments", "run": "an id and a file (or -)"}
	switch {
	case sub == "close" && len(pos) == 0:
		fmt.Fprintln(stderr, "agentbox sessions close: which sessions? give their ids (agentbox sessions list)")
		return exitUsage
	case sub == "run" && len(pos) != 2, (sub == "list" || sub == "create") && len(pos) != 0:
		fmt.Fprintf(stderr, "agentbox sessions %s: takes %s, got %q\n", sub, want[sub], strings.Join(pos, " "))
		return exitUsage
	}
	switch sub {
	case "list":
		return SessionsList(ctx, opts)
	case "create":
		return SessionsCreate(ctx, opts)
	case "close":
		return SessionsClose(ctx, opts, pos)
	}
	req, err := buildRequest(RunOptions{File: pos[1], Stdin: stdin})
	if err != nil {
		fmt.Fprintf(stderr, "agentbox sessions run: %v\n", err)
		return exitUsage
	}
	opts.Run.Code = req.Code
	return SessionsRun(ctx, opts, pos[0])
}
