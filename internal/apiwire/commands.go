package apiwire

import (
	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// CommandFromAPI turns the body of POST /v1/sessions/{id}/commands into the core's Command.
func CommandFromAPI(in api.CommandRequest) (sandbox.Command, error) {
	if err := checkTimeout(in.Timeout); err != nil {
		return sandbox.Command{}, err
	}
	var stdin []byte
	if in.Stdin != "" {
		stdin = []byte(in.Stdin)
	}
	return sandbox.Command{Argv: in.Argv, Shell: in.Cmd, Dir: in.Cwd, Env: in.Env, Stdin: stdin,
		Timeout: seconds(in.Timeout), Background: in.Background}, nil
}

// CommandToAPI is a command as the API shows it.
func CommandToAPI(c sandbox.CommandInfo) api.Command {
	out := api.Command{ID: c.ID, Session: c.Session, Argv: c.Argv, Cwd: c.Dir, Status: c.Status, ExitCode: c.ExitCode,
		Stdout: c.Stdout, Stderr: c.Stderr, StdoutTruncated: c.StdoutTruncated, StderrTruncated: c.StderrTruncated,
		StartedAt: c.Started, Error: c.Error}
	if out.Argv == nil {
		out.Argv = []string{}
	}
	if !c.Ended.IsZero() {
		e := c.Ended
		out.EndedAt = &e
		out.DurationMS = float64(e.Sub(c.Started).Microseconds()) / 1000
	}
	return out
}
