package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// RunOptions are the flags of `agentbox run` and what tests replace.
type RunOptions struct {
	// File is the Python file to run, or "-" for Stdin.
	File string
	// Runtime is auto, nano or heavy; empty means auto.
	Runtime string
	// Packages the code needs; they choose a heavy image (and so the heavy tier).
	Packages []string
	// Timeout (seconds) and MemoryMB; zero means the server's default.
	Timeout  float64
	MemoryMB int64
	// Files are uploaded into the sandbox before the code starts.
	Files []FileSpec
	// JSON prints the whole result (or error body) as JSON instead of the code's output.
	JSON bool
	// Figures is a directory to save the run's figures (artifacts) in. Empty: they are not
	// saved, and the run says so.
	Figures string
	// URL is the daemon's URL. Empty means AGENTBOX_URL, else http://127.0.0.1:8420; only then
	// may the run fall back to a local engine when no daemon answers. A URL given here or in
	// AGENTBOX_URL that does not answer is an error: the user asked for that daemon.
	URL string
	// DefaultURL is tried when neither URL nor AGENTBOX_URL is set. Default client.DefaultURL.
	DefaultURL string
	// APIKey is the daemon's key. Empty means AGENTBOX_API_KEY, else the api_key file in
	// DataDir (or the default data directory).
	APIKey string
	// DataDir and ConfigFile configure the local engine (and where the key file is looked for).
	DataDir    string
	ConfigFile string
	// Local skips the daemon and runs with a local engine.
	Local bool
	// HealthTimeout bounds the check for a daemon. Default 1s.
	HealthTimeout time.Duration
	Stdin         io.Reader
	Stdout        io.Writer
	Stderr        io.Writer
	// NewManager builds the local engine. Default daemon.NewManager.
	NewManager ManagerFactory
}

// FileSpec is one input file: Local on this machine, Remote in the sandbox (relative paths
// are in /home/user).
type FileSpec struct{ Local, Remote string }

// Exit codes of `agentbox run` when the API answers with an error instead of a result. A run
// that completes exits with the code's own exit code (1 after an uncaught exception).
var runExitCodes = map[string]int{
	api.CodeTimeout:            124, // as timeout(1)
	api.CodeOutputLimit:        125,
	api.CodePolicyViolation:    126,
	api.CodeMemoryLimit:        137, // as a process killed for memory
	api.CodeInvalidRequest:     65,  // sysexits EX_DATAERR
	api.CodeNotFound:           66,  // EX_NOINPUT
	api.CodeRuntimeUnavailable: 69,  // EX_UNAVAILABLE; also: no daemon at an explicit URL
	api.CodeInternal:           70,  // EX_SOFTWARE
	api.CodeConflict:           75,  // EX_TEMPFAIL
	api.CodeUnauthorized:       77,  // EX_NOPERM
}

const exitInterrupted = 130

// RunCode runs one file and returns the exit code. The code's stdout and stderr go to Stdout
// and Stderr; agentbox's own messages go to Stderr, prefixed "agentbox: ".
func RunCode(ctx context.Context, opts RunOptions) int {
	if opts.HealthTimeout <= 0 {
		opts.HealthTimeout = time.Second
	}
	if opts.NewManager == nil {
		opts.NewManager = daemon.NewManager
	}
	if opts.DefaultURL == "" {
		opts.DefaultURL = client.DefaultURL
	}
	req, err := buildRequest(opts)
	if err != nil {
		fmt.Fprintf(opts.Stderr, "agentbox run: %v\n", err)
		return exitUsage
	}
	r, closeRunner, code := pickRunner(ctx, opts, req.Code)
	if r == nil {
		return code
	}
	defer closeRunner()
	if opts.JSON {
		res, err := r.Run(ctx, req)
		return figures(ctx, opts, r, res, err, report(ctx, opts, res, err, false))
	}
	// The code's output goes to the terminal as it prints it; the result then adds only what
	// was not streamed (its notes on truncation, the exit code).
	streamed := false
	res, err := r.RunStream(ctx, req, toTerminal(opts.Stdout, opts.Stderr, &streamed, " (--json prints the whole result)"))
	return figures(ctx, opts, r, res, err, report(ctx, opts, res, err, streamed))
}

func buildRequest(opts RunOptions) (api.RunRequest, error) {
	var code []byte
	var err error
	switch opts.File {
	case "":
		return api.RunRequest{}, errors.New("which file? give a path, or - to read the code from stdin")
	case "-":
		code, err = io.ReadAll(opts.Stdin)
	default:
		code, err = os.ReadFile(opts.File)
	}
	if err != nil {
		return api.RunRequest{}, fmt.Errorf("read the code: %w", err)
	}
	req := api.RunRequest{Code: string(code), Runtime: opts.Runtime, Timeout: opts.Timeout, MemoryMB: opts.MemoryMB, Packages: opts.Packages}
	for _, f := range opts.Files {
		b, err := os.ReadFile(f.Local)
		if err != nil {
			return req, fmt.Errorf("input file: %w", err)
		}
		req.Files = append(req.Files, api.InputFile{Path: f.Remote, Content: b})
	}
	return req, nil
}

// pickRunner finds the daemon or starts a local engine. On failure it has reported the problem
// and returns a nil runner and the exit code.
func pickRunner(ctx context.Context, opts RunOptions, code string) (runner, func(), int) {
	noop := func() {}
	if !opts.Local {
		url, explicit := opts.URL, true
		if url == "" {
			url = os.Getenv("AGENTBOX_URL")
		}
		if url == "" {
			url, explicit = opts.DefaultURL, false
		}
		c, err := client.New(url, discoverKey(opts))
		if err != nil {
			fmt.Fprintf(opts.Stderr, "agentbox run: %v\n", err)
			return nil, nil, exitUsage
		}
		hctx, cancel := context.WithTimeout(ctx, opts.HealthTimeout)
		_, err = c.Health(hctx)
		cancel()
		switch {
		case err == nil:
			return c, noop, exitOK
		case ctx.Err() != nil:
			return nil, nil, exitInterrupted
		case explicit:
			fmt.Fprintf(opts.Stderr, "agentbox: no agentbox daemon answers at %s: %v (hint: start one with `agentbox serve`, or unset AGENTBOX_URL and drop --url to run with a local engine)\n", url, err)
			return nil, nil, runExitCodes[api.CodeRuntimeUnavailable]
		}
		fmt.Fprintf(opts.Stderr, "agentbox: no daemon at %s; starting a local engine for this run (`agentbox serve` keeps interpreters warm)\n", url)
	}
	cfg, err := loadConfig(opts.ConfigFile, "", opts.DataDir)
	if err != nil {
		fmt.Fprintf(opts.Stderr, "agentbox run: %v\n", err)
		return nil, nil, exitFailure
	}
	// One run needs one worker, nothing parked, and no tier it cannot go to.
	if cfg, err = daemon.ForOneRun(cfg, code, sandbox.Tier(opts.Runtime), opts.Packages); err != nil {
		fmt.Fprintf(opts.Stderr, "agentbox run: %v\n", err)
		return nil, nil, exitFailure
	}
	log := slog.New(slog.NewTextHandler(opts.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := opts.NewManager(ctx, cfg, log)
	if err != nil {
		msg := err.Error()
		if e := sandbox.AsError(err); e.Hint != "" {
			msg += " (hint: " + e.Hint + ")"
		}
		fmt.Fprintf(opts.Stderr, "agentbox: could not start a local engine: %s\n", msg)
		return nil, nil, runExitCodes[api.CodeRuntimeUnavailable]
	}
	return localRunner{m: m}, func() { m.Close() }, exitOK
}

// discoverKey finds the key as the client's FromEnv does, honouring --data-dir.
func discoverKey(opts RunOptions) string {
	if opts.APIKey != "" {
		return opts.APIKey
	}
	if k := os.Getenv("AGENTBOX_API_KEY"); k != "" {
		return k
	}
	if opts.DataDir != "" {
		if b, err := os.ReadFile(filepath.Join(opts.DataDir, apiKeyFile)); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return client.APIKeyFromEnv()
}

// report prints a run's outcome and returns the exit code. streamed says the code's output was
// already printed as it came.
func report(ctx context.Context, opts RunOptions, res *api.Result, err error, streamed bool) int {
	var ce *client.Error
	switch {
	case err == nil:
		if opts.JSON {
			printJSON(opts.Stdout, res)
		} else {
			printOutput(opts, res, streamed)
		}
		if res.ExitCode < 0 || res.ExitCode > 255 {
			return exitFailure
		}
		return res.ExitCode
	case errors.As(err, &ce):
		if opts.JSON {
			printJSON(opts.Stdout, api.ErrorResponse{
				Error:  api.ErrorDetail{Code: ce.Code, Message: ce.Message, Hint: ce.Hint},
				Result: ce.Result,
			})
		} else if ce.Result != nil {
			printOutput(opts, ce.Result, streamed)
		}
		fmt.Fprintln(opts.Stderr, ce.Error())
		if code, ok := runExitCodes[ce.Code]; ok {
			return code
		}
		return exitFailure
	case ctx.Err() != nil:
		fmt.Fprintln(opts.Stderr, "agentbox: interrupted; the run was stopped")
		return exitInterrupted
	}
	fmt.Fprintf(opts.Stderr, "agentbox run: %v\n", err)
	return exitFailure
}

func printOutput(opts RunOptions, res *api.Result, streamed bool) {
	if !streamed {
		io.WriteString(opts.Stdout, res.Stdout)
		io.WriteString(opts.Stderr, res.Stderr)
	}
	if res.StdoutTruncated {
		fmt.Fprintln(opts.Stderr, "agentbox: stdout went over its limit; the rest was dropped")
	}
	if res.StderrTruncated {
		fmt.Fprintln(opts.Stderr, "agentbox: stderr went over its limit; the rest was dropped")
	}
}

func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func runCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	opts := RunOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr}
	var (
		timeout  secondsFlag
		memory   mebibytesFlag
		files    fileFlag
		packages listFlag
	)
	fs := newFlagSet("run", `Usage: agentbox run [flags] FILE
       agentbox run [flags] -          (read the code from stdin)

Runs a Python file in a fresh sandbox and prints what it printed: its stdout to stdout, its
stderr (and traceback) to stderr. Uses the daemon at AGENTBOX_URL (default
http://127.0.0.1:8420) when one answers, otherwise starts a local engine just for this run.

Exit code: the code's own (0, 1 after an uncaught exception, or sys.exit's). When a limit or
an error ends the run instead: 124 timeout, 137 memory limit, 125 output limit, 126 policy
violation, 65 invalid request, 69 runtime or daemon unavailable, 77 wrong API key, 70 internal
error, 2 bad command line. What the code printed before a limit is still printed.

Examples:
  agentbox run script.py
  echo 'print(1+1)' | agentbox run -
  agentbox run --timeout 5 --memory 512 --file data.csv script.py
  agentbox run --json --runtime nano script.py
  agentbox run --package pandas analysis.py
  agentbox run --figures charts/ plot.py`, stderr)
	fs.StringVar(&opts.Runtime, "runtime", "", "runtime: auto (the router picks by the code's imports), nano or heavy (default auto)")
	fs.Var(&timeout, "timeout", "wall-clock limit in `seconds` (30, 2.5) or a duration (1m30s) (default: the server's, 30s)")
	fs.Var(&memory, "memory", "memory limit in `MiB` (512) or with a unit (2G) (default: the server's, 256)")
	fs.Var(&packages, "package", "a Python package the code needs, e.g. pandas (picks a heavy image that has it); repeatable or comma-separated")
	fs.Var(&files, "file", "upload a file before the code starts: `LOCAL[:REMOTE]`; REMOTE is relative to /home/user (default: LOCAL's base name); repeatable")
	fs.BoolVar(&opts.JSON, "json", false, "print the whole result as JSON at the end (stdout, stderr, exit_code, error, files, timings, ...) instead of streaming the output as the code prints it")
	fs.StringVar(&opts.Figures, "figures", "", "save the figures the code makes (matplotlib's plt.show()) as files in `DIR`")
	fs.StringVar(&opts.URL, "url", "", "daemon `URL` (default $AGENTBOX_URL or http://127.0.0.1:8420)")
	fs.BoolVar(&opts.Local, "local", false, "do not look for a daemon; run with a local engine")
	fs.StringVar(&opts.DataDir, "data-dir", "", "data `DIR` of the local engine and of the API key file (default $AGENTBOX_DATA_DIR or ~/.cache/agentbox)")
	fs.StringVar(&opts.ConfigFile, "config", "", "configuration `FILE` of the local engine (JSON)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return flagExit(err)
	}
	switch len(pos) {
	case 0:
		fmt.Fprintln(stderr, "agentbox run: which file? give a path, or - to read the code from stdin (agentbox run -h for help)")
		return exitUsage
	case 1:
	default:
		fmt.Fprintf(stderr, "agentbox run: one file at a time; got %q\n", pos)
		return exitUsage
	}
	opts.File = pos[0]
	opts.Timeout, opts.MemoryMB, opts.Packages = float64(timeout), int64(memory), packages
	for _, f := range files {
		opts.Files = append(opts.Files, FileSpec{Local: f.local, Remote: f.remote})
	}
	return RunCode(ctx, opts)
}

// noticeLine says what a notice says, for a person: that the session moved to another node and
// which step it resumed from.
func noticeLine(n api.Notice) string {
	if n.Kind != api.NoticeSessionMoved {
		return fmt.Sprintf("agentbox: notice %s: %s", n.Kind, n.Reason)
	}
	line := fmt.Sprintf("agentbox: the session moved from node %s to node %s and resumed from step %s", n.FromNode, n.ToNode, n.Step)
	if n.Reason != "" {
		line += " (" + n.Reason + ")"
	}
	return line
}

// toTerminal is the handler of a streamed run's or command's events at a terminal: output goes to
// stdout and stderr as it comes, and output the daemon dropped because the terminal read too
// slowly is said so on stderr, followed by hint. It sets *streamed once anything was shown.
func toTerminal(stdout, stderr io.Writer, streamed *bool, hint string) func(api.StreamEvent) {
	return func(ev api.StreamEvent) {
		switch ev.Type {
		case api.EventStdout:
			*streamed = true
			io.WriteString(stdout, ev.Text)
		case api.EventStderr:
			*streamed = true
			io.WriteString(stderr, ev.Text)
		case api.EventDropped:
			*streamed = true
			fmt.Fprintf(stderr, "\nagentbox: %d bytes of stdout and %d of stderr were not shown: this terminal read too slowly%s\n",
				ev.Dropped.StdoutBytes, ev.Dropped.StderrBytes, hint)
		case api.EventNotice:
			if ev.Notice != nil {
				fmt.Fprintln(stderr, noticeLine(*ev.Notice))
			}
		}
	}
}
