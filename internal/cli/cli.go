package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes of agentbox itself. `agentbox run` otherwise exits with the code's own exit code;
// see runExitCodes for the codes of API errors.
const (
	exitOK      = 0
	exitFailure = 1 // agentbox itself failed (I/O, no daemon, ...)
	exitUsage   = 2 // bad command line
)

const usage = `agentbox runs untrusted Python code in sandboxes, for AI agents.

Usage:
  agentbox <command> [flags]

Commands:
  run FILE      run a Python file (or - for stdin) and print what it printed;
                uses the daemon if one is running, else a one-off local engine
  serve         start the daemon: the HTTP API on 127.0.0.1:8420
  setup         fetch and prepare what the runtimes need (run once after install)
  bench         measure start and run times against baselines
  image         build and list the heavy tier's images (image build NAME, image list)
  audit         check the audit log's signatures and hashes, or read it (audit verify, audit query)
  keys          tenants' API keys: create, list, revoke, rotate
  mcp           serve agentbox's tools to an MCP client over stdio (the daemon serves /mcp)
  route FILE    say which tier the daemon would run a file on, and why, without running it
  sessions      the daemon's sessions: list, create, run ID FILE, close ID
  volumes       named volumes for heavy sessions: list, create NAME, rm NAME, put, get
  exec          run a shell command in a heavy session: exec SESSION -- ls -la
  steps         list a session's steps (steps SESSION); time travel: rewind SESSION STEP,
                fork SESSION STEP, inspect SESSION STEP, diff SESSION STEP (both with
                --context NAME), pause SESSION, resume SESSION
  version       print the version

Quick start:
  agentbox setup
  echo 'print(6 * 7)' | agentbox run -
  agentbox serve &            # keeps interpreters warm: runs start in milliseconds
  agentbox run --json script.py

Run "agentbox <command> -h" for a command's flags.

Environment:
  AGENTBOX_URL        the daemon's URL for clients (default http://127.0.0.1:8420)
  AGENTBOX_API_KEY    the API key; the daemon uses it instead of making one
  AGENTBOX_DATA_DIR   the data directory (default ~/.cache/agentbox); holds api_key
`

// Main runs the command in args (without the program name) and returns the exit code.
// SIGINT and SIGTERM cancel the command's context (a running code is stopped, a daemon shuts
// down gracefully); a second signal kills the process.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // restore the default: the next signal ends the process
	}()

	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return runCmd(ctx, rest, stdin, stdout, stderr)
	case "serve":
		return serveCmd(ctx, rest, stdout, stderr)
	case "setup":
		return setupCmd(ctx, rest, stdout, stderr)
	case "bench":
		return benchCmd(ctx, rest, stdout, stderr)
	case "image":
		return imageCmd(ctx, rest, stdout, stderr)
	case "audit":
		return auditCmd(ctx, rest, stdout, stderr)
	case "keys":
		return keysCmd(ctx, rest, stdout, stderr)
	case "mcp":
		return mcpCmd(ctx, rest, stdin, stdout, stderr)
	case "route":
		return routeCmd(ctx, rest, stdin, stdout, stderr)
	case "sessions":
		return sessionsCmd(ctx, rest, stdin, stdout, stderr)
	case "exec":
		return execCmd(ctx, rest, stdin, stdout, stderr)
	case "volumes":
		return volumesCmd(ctx, rest, stdin, stdout, stderr)
	case "steps", "rewind", "fork", "pause", "resume", "inspect", "diff":
		return stepsCmd(ctx, cmd, rest, stdout, stderr)
	case "version", "--version":
		fmt.Fprintf(stdout, "agentbox %s\n", VersionString())
		return exitOK
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "agentbox: unknown command %q\n\n%s", cmd, usage)
	return exitUsage
}

// newFlagSet returns a flag set that reports errors instead of exiting, with the usage text
// given.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "%s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseInterleaved parses flags that may come before or after the positional arguments
// ("agentbox run script.py --json"); "--" ends the flags.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// flagExit turns a flag parse error into an exit code: help is not a failure.
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}
