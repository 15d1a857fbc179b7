package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// The baselines are interpreters the bench starts itself: a python3 process per run, a python3
// REPL over a pipe, a node process running Pyodide. What they share is here.

// timedRun runs cmd and returns its stdout and the wall time from start to exit. A failure says
// what (e.g. "python3") and carries what the process wrote to stderr.
func timedRun(cmd *exec.Cmd, what string) (string, time.Duration, error) {
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w: %s", what, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), d, nil
}

// startPiped starts cmd with a pipe to its stdin and one from its stdout: the line protocols of
// the REPL baselines and of the Pyodide driver.
func startPiped(cmd *exec.Cmd) (io.WriteCloser, io.ReadCloser, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	return in, out, nil
}

// replLoop is the native REPL the session baselines talk to: it reads one JSON-encoded cell a
// line, runs it in one namespace and ends its output with a marker line. That is what a warm
// session does, minus the sandbox, its agent and its framing.
const replLoop = `import json, sys
ns = {"__name__": "__main__"}
for line in sys.stdin:
    exec(compile(json.loads(line), "<cell>", "exec"), ns)
    sys.stdout.write("\x00done\n")
    sys.stdout.flush()
`

// nativeREPL is a replLoop process.
type nativeREPL struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

var _ targetSession = (*nativeREPL)(nil)

// startREPL starts cmd, a python3 running replLoop, with pipes to send it cells and read their
// output. It serves the heavy bench's native cells and the nano bench's idle baselines.
func startREPL(cmd *exec.Cmd) (*nativeREPL, error) {
	in, out, err := startPiped(cmd)
	if err != nil {
		return nil, err
	}
	return &nativeREPL{cmd: cmd, in: in, out: bufio.NewReader(out)}, nil
}

// Run sends one cell and returns what it printed.
func (r *nativeREPL) Run(ctx context.Context, code string) (runResult, error) {
	b, _ := json.Marshal(code)
	if _, err := r.in.Write(append(b, '\n')); err != nil {
		return runResult{}, err
	}
	var out strings.Builder
	for {
		line, err := r.out.ReadString('\n')
		if err != nil {
			return runResult{}, fmt.Errorf("native REPL: %w", err)
		}
		if line == "\x00done\n" {
			return runResult{Stdout: out.String()}, nil
		}
		out.WriteString(line)
	}
}

func (r *nativeREPL) Close() error {
	r.in.Close()
	return r.cmd.Wait()
}
