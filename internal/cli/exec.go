package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/agentbox-dev/agentbox/api"
)

// ExecOptions are the flags of `agentbox exec` and what tests replace.
type ExecOptions struct {
	DaemonOptions
	Session string
	Req     api.CommandRequest
	JSON    bool
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
}

// Exec runs a command in a heavy session. In the foreground its output streams to Stdout and
// Stderr and the exit code is the command's (124 after its timeout, 137 when killed); in the
// background it prints the command's id.
func Exec(ctx context.Context, opts ExecOptions) int {
	c, err := opts.client()
	if err != nil {
		fmt.Fprintf(opts.Stderr, "agentbox exec: %v\n", err)
		return exitUsage
	}
	if opts.Req.Background || opts.JSON {
		cmd, err := c.RunCommand(ctx, opts.Session, opts.Req)
		if err != nil {
			return apiFailure(ctx, opts.Stderr, "exec", err)
		}
		switch {
		case opts.JSON:
			printJSON(opts.Stdout, cmd)
		default:
			fmt.Fprintln(opts.Stdout, cmd.ID)
			return exitOK
		}
		return commandExit(cmd)
	}
	cmd, err := c.RunCommandStream(ctx, opts.Session, opts.Req, toTerminal(opts.Stdout, opts.Stderr, new(bool), ""))
	if err != nil {
		return apiFailure(ctx, opts.Stderr, "exec", err)
	}
	if cmd.StdoutTruncated || cmd.StderrTruncated {
		fmt.Fprintln(opts.Stderr, "agentbox: the command's output went over the session's limit; the rest was dropped")
	}
	return commandExit(cmd)
}

// commandExit is the exit code of `agentbox exec` for a command that ended.
func commandExit(cmd *api.Command) int {
	switch cmd.Status {
	case "exited":
		if cmd.ExitCode >= 0 && cmd.ExitCode <= 255 {
			return cmd.ExitCode
		}
		return exitFailure
	case "timeout":
		return runExitCodes[api.CodeTimeout]
	case "killed":
		return 137
	}
	return exitFailure
}

func execCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const synopsis = `Usage: agentbox exec [--cwd DIR] [--env K=V] [--timeout S] [--background] SESSION -- COMMAND [ARG...]
       agentbox exec SESSION -c 'shell line'

Runs a command in a heavy session's sandbox, beside its interpreter (same files, user,
environment and egress), and streams its output; the exit code is the command's. With
--background it prints the command's id at once (GET /v1/sessions/SESSION/commands/ID reads its
logs; DELETE kills it). A nano session has no processes and refuses.

Examples:
  id=$(agentbox sessions create --runtime heavy)
  agentbox exec "$id" -- ls -la
  agentbox exec "$id" -c 'pip list | grep pandas'`
	opts := ExecOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr}
	var (
		timeout secondsFlag
		env     envFlag
		shell   string
	)
	fs := newFlagSet("exec", synopsis, stderr)
	fs.StringVar(&opts.URL, "url", "", "daemon `URL` (default $AGENTBOX_URL or http://127.0.0.1:8420)")
	fs.StringVar(&opts.DataDir, "data-dir", "", "data `DIR` whose api_key file holds the key")
	fs.StringVar(&opts.Req.Cwd, "cwd", "", "working `DIR` (default /home/user)")
	fs.Var(&env, "env", "an environment variable `K=V`; repeatable")
	fs.Var(&timeout, "timeout", "the command's limit in `seconds` or a duration (default: the session's run timeout)")
	fs.BoolVar(&opts.Req.Background, "background", false, "start it and print its id")
	fs.StringVar(&shell, "c", "", "a shell `LINE` for /bin/sh -c instead of a command after --")
	fs.BoolVar(&opts.JSON, "json", false, "print the command as JSON when it has ended")
	var pos []string
	for i, a := range args {
		if a == "--" {
			pos = args[i+1:]
			args = args[:i]
			break
		}
	}
	flagPos, err := parseInterleaved(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(flagPos) != 1 {
		fmt.Fprintf(stderr, "agentbox exec: give the session's id, then -- and the command\n\n%s\n", synopsis)
		return exitUsage
	}
	opts.Session = flagPos[0]
	switch {
	case shell != "" && len(pos) > 0:
		fmt.Fprintln(stderr, "agentbox exec: give -c LINE or a command after --, not both")
		return exitUsage
	case shell != "":
		opts.Req.Cmd = shell
	case len(pos) == 0:
		fmt.Fprintf(stderr, "agentbox exec: which command? put it after --\n\n%s\n", synopsis)
		return exitUsage
	default:
		opts.Req.Argv = pos
	}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			fmt.Fprintf(stderr, "agentbox exec: --env %q: want K=V\n", kv)
			return exitUsage
		}
		if opts.Req.Env == nil {
			opts.Req.Env = map[string]string{}
		}
		opts.Req.Env[k] = v
	}
	opts.Req.Timeout = float64(timeout)
	return Exec(ctx, opts)
}

// envFlag collects K=V values as given (a value may hold commas).
type envFlag []string

func (e *envFlag) String() string     { return strings.Join(*e, " ") }
func (e *envFlag) Set(v string) error { *e = append(*e, v); return nil }
