package interp

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Bash cells. A bash context (the sandbox's default one, which runCode(code, {language: "bash"})
// uses, or one made with POST /contexts {"language": "bash"}) is a persistent bash process in the
// sandbox, so cd, variables, functions and exports carry from one cell to the next, as in E2B's
// bash kernel. The shell is kept by the session's own Python interpreter (bash_host.py): each
// cell is one run of the session, whose code hands the cell to the shell and relays its stdout
// and stderr as they come until the shell prints the cell's sentinel (random per cell) with its
// exit status. So nothing new listens in the sandbox, and a cell's output caps, timeout and audit
// record are a run's. A cell that exits non-zero is the cell's error as E2B's bash kernel reports
// it: name "", value the exit status. A cell the client stops waiting for (the SDK's timeoutMs)
// or that runs past the run's timeout is interrupted (SIGINT to the shell's process group, which
// returns from the cell and keeps the shell); one that ignores the interrupt has its shell
// killed, and the next cell starts a new shell and says so on stderr.
//
// A session without processes (the nano tier) has no shell: its bash cells get the typed error
// of a command there.

//go:embed bash_host.py
var bashHost string

// bashHostVersion is VERSION of bash_host.py: a session whose interpreter holds another version
// loads this one.
var bashHostVersion = func() int {
	for _, l := range strings.Split(bashHost, "\n") {
		if v, ok := strings.CutPrefix(l, "VERSION = "); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
		}
	}
	panic("interp: bash_host.py has no VERSION")
}()

// bashState is bash_host.py's STATE: where each shell's pid and cell are.
const bashState = "/tmp/.agentbox-bash"

// bashLoader loads bash_host.py into the module _agentbox_bash unless it is there in this
// version. It runs in a namespace of its own, so the session's variables are left alone.
const bashLoader = `import sys, types
m = sys.modules.get("_agentbox_bash")
if getattr(m, "VERSION", None) != V:
    m = types.ModuleType("_agentbox_bash")
    exec(compile(SRC, "<agentbox_bash>", "exec"), m.__dict__)
    sys.modules["_agentbox_bash"] = m
`

// pyString is s as a Python string literal (a JSON string is one).
func pyString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// bashCell is the Python code of one bash cell of context key: its value is the exit status.
func bashCell(key, code string, env map[string]string, sentinel string) string {
	envLit := "{}"
	if len(env) > 0 {
		b, _ := json.Marshal(env)
		envLit = string(b)
	}
	return fmt.Sprintf("# agentbox: a bash cell of the code interpreter (context %s), run by the context's shell\n"+
		"__import__(\"builtins\").exec(%s, {\"SRC\": %s, \"V\": %d})\n"+
		"__import__(\"sys\").modules[\"_agentbox_bash\"].cell(%s, %s, %s, %s)\n",
		key, pyString(bashLoader), pyString(bashHost), bashHostVersion, pyString(key), pyString(code), envLit, pyString(sentinel))
}

// runBash runs req.Code as a cell of bash context c (the default one: the sandbox's own) in the
// sandbox's session. Its shell is known by the context's key (codeContext.key); its Python run
// is in the context (so a context's shell starts in the context's cwd).
func (h *Handler) runBash(ctx context.Context, out *lines, t Target, c *codeContext, req executeRequest) {
	session, key := t.Session, c.key()
	// A tier whose code cannot start processes keeps no shell: the cell is a command there,
	// which such a tier answers with its typed error.
	if info, err := t.Engine.Session(session); err == nil {
		if caps, _ := t.Engine.Capabilities(info.Tier); !caps.Processes {
			h.runBashCommand(ctx, out, t, session, req)
			return
		}
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	sentinel := "__agentbox_cell_end_" + hex.EncodeToString(b[:])
	s := newSink()
	rl := newRelay(out, t.Engine)
	rl.run(s, func() (*sandbox.Result, error) {
		// The cell goes on when the client leaves, until interruptBash has stopped it, so the
		// session's next run never meets this one still running.
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-ctx.Done():
				interruptBash(t, session, key, done)
			case <-done:
			}
		}()
		run := &sandbox.RunRequest{Code: bashCell(key, req.Code, req.EnvVars, sentinel), Output: s,
			Limits: sandbox.Limits{Timeout: t.Engine.Policy().Max.Timeout}}
		if c.name != "" {
			run.Context, run.ContextDir = c.name, c.Cwd
		}
		runCtx := context.WithoutCancel(ctx)
		res, err := t.Engine.RunInSession(runCtx, session, run)
		if res == nil && tenantRefusedTimeout(err) {
			run.Limits = sandbox.Limits{}
			res, err = t.Engine.RunInSession(runCtx, session, run)
		}
		if ran(res, err) {
			h.counted(t, c, true)
		}
		return bashResult(res), err
	})
}

// bashResult turns the run of a bash cell into the cell's result: its value is the exit status
// (never shown as a result), non-zero being the cell's error as E2B's bash kernel reports it.
func bashResult(res *sandbox.Result) *sandbox.Result {
	if res == nil || res.Error != nil || len(res.Outputs) == 0 {
		return res
	}
	code, err := strconv.Atoi(strings.TrimSpace(res.Outputs[0].Text))
	res.Outputs = nil
	if err != nil {
		return res
	}
	res.ExitCode = code
	if code != 0 {
		res.Error = &sandbox.PyError{Name: "", Value: strconv.Itoa(code)}
	}
	return res
}

// interruptBash stops the running cell of context key when its client has left: SIGINT to the
// shell's process group (the cell returns, the shell stays), and if the cell has not ended
// (done) within a few seconds, SIGKILL (the shell goes; the next cell starts another). Both are
// commands in the session, the way agentbox reaches into a sandbox.
func interruptBash(t Target, session, key string, done <-chan struct{}) {
	signalShell(t, session, key, "INT")
	select {
	case <-done:
		return
	case <-time.After(3 * time.Second):
	}
	signalShell(t, session, key, "KILL")
}

// signalShell sends sig to the process group of context key's shell, by a command in the
// session. "END" kills it as ended on purpose (its pid file removed first, so its next cell
// starts a new shell without saying the last one was lost).
func signalShell(t Target, session, key, sig string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	script := `p=$(cat "$1" 2>/dev/null) && kill -s "$2" -- "-$p" 2>/dev/null; exit 0`
	if sig == "END" {
		script, sig = `p=$(cat "$1" 2>/dev/null) && rm -f "$1" && kill -s "$2" -- "-$p" 2>/dev/null; exit 0`, "KILL"
	}
	_, _ = t.Engine.RunCommand(ctx, session, sandbox.Command{
		Argv:    []string{"/bin/sh", "-c", script, "sh", bashState + "/" + key + ".pid", sig},
		Timeout: 10 * time.Second,
	}, nil)
}

// endShell ends the shell of bash context c (restarted or removed); nothing for another context.
func endShell(t Target, c *codeContext) {
	if c.Language == "bash" {
		signalShell(t, t.Session, c.key(), "END")
	}
}

// runBashCommand runs the code as a one-off shell command in the session: the way of a session
// without a persistent interpreter to keep a shell in, which answers with the command's error.
func (h *Handler) runBashCommand(ctx context.Context, out *lines, t Target, session string, req executeRequest) {
	s := newSink()
	rl := newRelay(out, t.Engine)
	rl.run(s, func() (*sandbox.Result, error) {
		c, err := t.Engine.RunCommand(ctx, session, sandbox.Command{Argv: []string{"/bin/bash", "-c", req.Code}, Env: req.EnvVars}, s)
		if err != nil {
			return nil, err
		}
		res := &sandbox.Result{ExitCode: c.ExitCode}
		if c.Status != sandbox.CommandExited || c.ExitCode != 0 {
			res.Error = &sandbox.PyError{Name: "", Value: strconv.Itoa(c.ExitCode)}
		}
		return res, nil
	})
}
