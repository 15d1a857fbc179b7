package sandbox

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Commands in sessions. A session whose sandbox has processes (SessionCommands: the heavy tier)
// runs shell commands beside its interpreter: in the same file system, as the same user, with the
// same environment and the same way out (the egress gateway, when the session has network). A
// command runs in the foreground (the call waits for its exit, and can stream its output like a
// run) or in the background (the call answers at once with its id; its logs are read while it
// runs, and it can be killed). Its output is kept up to the session's stdout and stderr caps; its
// timeout is the request's or the session's run timeout, within the server's maximum, at which it
// is killed. A session keeps at most MaxCommands commands, dropping the oldest that have ended,
// and runs at most MaxRunningCommands at once. Closing the session kills them all (the sandbox
// goes).

// MaxCommands and MaxRunningCommands bound a session's commands. MaxCommandStdin bounds what a
// command is given on stdin: it fits a pipe's buffer, so feeding it never waits on a command
// that does not read (the guest's channel would wait behind it).
const (
	MaxCommands        = 64
	MaxRunningCommands = 16
	MaxCommandStdin    = 64 << 10
)

// Command statuses.
const (
	CommandRunning = "running"
	CommandExited  = "exited"
	CommandKilled  = "killed"
	CommandTimeout = "timeout"
	CommandFailed  = "failed" // the sandbox ended under it, or it could not start
)

// SessionCommands is an optional ability of a Session: running processes beside its interpreter.
type SessionCommands interface {
	// StartCommand starts spec and returns at once; the process's stdout and stderr go to out as
	// they come.
	StartCommand(ctx context.Context, spec CommandSpec, out OutputSink) (Process, error)
}

// CommandSpec is a process for a runtime to start: its command line already resolved (a shell
// line is ["/bin/sh", "-c", line]).
type CommandSpec struct {
	Argv []string
	// Dir is absolute (CleanPath).
	Dir string
	Env map[string]string
	// Stdin is written to the process's stdin, which is then closed unless OpenStdin is set.
	Stdin []byte
	// OpenStdin keeps stdin open after Stdin: the Process is then a ProcessStdin.
	OpenStdin bool
	// StderrBytes caps what the runtime forwards of stderr (the Manager caps both streams too).
	StderrBytes int64
}

// Process is a started command.
type Process interface {
	// Done is closed when the process has ended.
	Done() <-chan struct{}
	// Exit says how it ended (valid once Done is closed): its exit code (-1 for a signal), a
	// description ("exit status 0", "signal: killed"), and an error when the sandbox ended
	// under it.
	Exit() (code int, status string, err error)
	// Kill ends it (and its process group).
	Kill() error
}

// ProcessStdin is an optional ability of a Process started with OpenStdin: stdin fed while it
// runs.
type ProcessStdin interface {
	// WriteStdin writes p to the process's stdin; CloseStdin closes it (end of input).
	WriteStdin(p []byte) error
	CloseStdin() error
}

// Command is a request to run a command in a session.
type Command struct {
	// Argv is the command line; Shell, instead, is a line for /bin/sh -c. Exactly one is set.
	Argv  []string
	Shell string
	// Dir is where it runs: absolute, or relative to WorkDir (the default).
	Dir   string
	Env   map[string]string
	Stdin []byte
	// OpenStdin keeps stdin open after Stdin, for WriteCommandStdin and CloseCommandStdin. What a
	// command is given on stdin over its life stays within MaxCommandStdin: the runtime's pipe
	// holds that much, so feeding it never waits on a command that does not read.
	OpenStdin bool
	// Timeout of the command; zero: the session's run timeout.
	Timeout time.Duration
	// Background answers at once; the command goes on until it exits, is killed or times out.
	Background bool
}

// CommandInfo describes a command of a session.
type CommandInfo struct {
	ID      string
	Session string
	Argv    []string
	Dir     string
	// Status is one of the Command statuses.
	Status                           string
	ExitCode                         int
	Stdout, Stderr                   string
	StdoutTruncated, StderrTruncated bool
	Started, Ended                   time.Time
	// Error says why a failed command failed.
	Error string
	// Tier is the session's tier, for the audit record.
	Tier Tier
}

// command is a command the Manager keeps: its logs and its process. It is the runtime's
// OutputSink for the process: it keeps the output up to the caps and passes it on to the caller's
// stream, if any.
type command struct {
	mu    sync.Mutex
	info  CommandInfo
	limit [2]int64
	buf   [2]strings.Builder
	// stream is the foreground caller's sink (a streamer: capped, whole characters).
	stream *streamer
	// followers get the output as it comes after they joined (FollowCommand).
	followers map[*follower]struct{}
	// stdinSent counts what the command was given on stdin; stdinOpen says whether it may get
	// more.
	stdinMu   sync.Mutex
	stdinSent int
	stdinOpen bool
	proc      Process
	done      chan struct{}
	kill      string // the status a kill of ours gives: killed or timeout
}

func (c *command) Write(stream Stream, p []byte) {
	c.mu.Lock()
	i := streamIndex(stream)
	if room := c.limit[i] - int64(c.buf[i].Len()); int64(len(p)) > room {
		p = p[:max(0, room)]
		if i == 0 {
			c.info.StdoutTruncated = true
		} else {
			c.info.StderrTruncated = true
		}
	}
	c.buf[i].Write(p)
	st := c.stream
	var fs []*follower
	for f := range c.followers {
		fs = append(fs, f)
	}
	c.mu.Unlock()
	if len(p) == 0 {
		return
	}
	if st != nil {
		st.Write(stream, p)
	}
	for _, f := range fs {
		f.Write(stream, p)
	}
}

// follower is a sink that joined a running command: its calls are serialised and end when it
// leaves.
type follower struct {
	mu   sync.Mutex
	out  OutputSink
	gone bool
}

func (f *follower) Write(stream Stream, p []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.gone {
		f.out.Write(stream, p)
	}
}

// snapshot is the command's description with its logs so far.
func (c *command) snapshot() CommandInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapshotLocked()
}

// snapshotLocked is snapshot for a caller that holds c.mu.
func (c *command) snapshotLocked() CommandInfo {
	info := c.info
	info.Argv = slices.Clone(info.Argv)
	info.Stdout, info.Stderr = c.buf[0].String(), c.buf[1].String()
	return info
}

// RunCommand runs c in session id (see the package comment above). out, when set, gets a
// foreground command's output as it comes.
func (m *Manager) RunCommand(ctx context.Context, id string, c Command, out OutputSink) (CommandInfo, error) {
	s, err := m.get(id)
	if err != nil {
		return CommandInfo{}, err
	}
	m.mu.Lock()
	impl, info, env := s.impl, s.info, s.env
	m.mu.Unlock()
	sc, ok := impl.(SessionCommands)
	if !ok {
		return CommandInfo{}, Errorf(KindInvalidRequest, "session %s runs on %s, which has no processes: its code runs in a WebAssembly interpreter with no shell and no programs to start", id, info.Tier).
			WithHint("run commands in a heavy session (POST /v1/sessions with \"runtime\": \"heavy\"); in this session, do it in Python (os.listdir, pathlib)")
	}
	argv := c.Argv
	switch {
	case len(c.Argv) > 0 && c.Shell != "":
		return CommandInfo{}, Errorf(KindInvalidRequest, "a command has argv or cmd, not both").WithHint("give argv for a program and its arguments, or cmd for a shell line")
	case c.Shell != "":
		argv = []string{"/bin/sh", "-c", c.Shell}
	case len(argv) == 0 || argv[0] == "":
		return CommandInfo{}, Errorf(KindInvalidRequest, "the command is empty").WithHint("give argv (a program and its arguments) or cmd (a shell line)")
	}
	if len(c.Stdin) > MaxCommandStdin {
		return CommandInfo{}, Errorf(KindInvalidRequest, "stdin of %d bytes is over the %d bytes a command may be given", len(c.Stdin), MaxCommandStdin).
			WithHint("write larger input to a file first (PUT /v1/sessions/{id}/files/content) and redirect it: cmd \"prog < file\"")
	}
	dir := WorkDir
	if c.Dir != "" {
		if dir, err = CleanPath(c.Dir); err != nil {
			return CommandInfo{}, err
		}
	}
	limits := info.Limits
	if c.Timeout != 0 {
		l, err := m.policy.Apply(Limits{Timeout: c.Timeout})
		if err != nil {
			return CommandInfo{}, err
		}
		if _, err := m.checkTenant(CallerOf(ctx), "", "", false, "", Limits{Timeout: l.Timeout}); err != nil {
			return CommandInfo{}, err
		}
		limits.Timeout = l.Timeout
	}
	cmd := &command{
		info: CommandInfo{ID: "cmd_" + newID()[3:], Session: id, Argv: slices.Clone(argv), Dir: dir,
			Status: CommandRunning, Started: time.Now().UTC(), Tier: info.Tier},
		limit:     [2]int64{limits.StdoutBytes, limits.StderrBytes},
		done:      make(chan struct{}),
		stdinSent: len(c.Stdin),
		stdinOpen: c.OpenStdin,
	}
	if !c.Background {
		cmd.stream = newStreamer(out, limits)
	}
	if err := m.addCommand(s, cmd); err != nil {
		return CommandInfo{}, err
	}
	spec := CommandSpec{Argv: argv, Dir: dir, Env: maps.Clone(env), Stdin: c.Stdin, OpenStdin: c.OpenStdin, StderrBytes: limits.StderrBytes}
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	maps.Copy(spec.Env, c.Env)
	// The process outlives the request that started it when it runs in the background.
	proc, err := sc.StartCommand(context.WithoutCancel(ctx), spec, cmd)
	m.mu.Lock()
	s.tl.wokeFromHibernation() // the tier restored a hibernated session for it
	m.mu.Unlock()
	if err != nil {
		cmd.mu.Lock()
		cmd.info.Status, cmd.info.Error, cmd.info.ExitCode, cmd.info.Ended = CommandFailed, err.Error(), -1, time.Now().UTC()
		cmd.mu.Unlock()
		close(cmd.done)
		return cmd.snapshot(), err
	}
	cmd.mu.Lock()
	cmd.proc = proc
	killed := cmd.kill != ""
	cmd.mu.Unlock()
	if killed {
		_ = proc.Kill() // killed while it started
	}
	go m.watchCommand(cmd, limits.Timeout)
	m.log.Debug("command started", "session", id, "command", cmd.info.ID, "background", c.Background)
	if c.Background {
		return cmd.snapshot(), nil
	}
	select {
	case <-cmd.done:
	case <-ctx.Done():
		// The caller left: a foreground command has nobody to answer.
		cmd.stop(CommandKilled)
		<-cmd.done
	}
	cmd.stream.flush()
	return cmd.snapshot(), nil
}

// stop kills the command, which then ends with status.
func (c *command) stop(status string) {
	c.mu.Lock()
	if c.kill == "" {
		c.kill = status
	}
	p := c.proc
	c.mu.Unlock()
	if p != nil {
		_ = p.Kill()
	}
}

// watchCommand waits for the command's end (killing it at its timeout) and records it.
func (m *Manager) watchCommand(c *command, timeout time.Duration) {
	var expire <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expire = t.C
	}
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	select {
	case <-p.Done():
	case <-expire:
		c.stop(CommandTimeout)
		select {
		case <-p.Done():
		case <-time.After(10 * time.Second):
		}
	}
	code, status, err := -1, "", error(nil)
	select {
	case <-p.Done():
		code, status, err = p.Exit()
	default:
		err = fmt.Errorf("the process did not end after it was killed")
	}
	c.mu.Lock()
	c.info.ExitCode, c.info.Ended = code, time.Now().UTC()
	switch {
	case c.kill != "":
		c.info.Status = c.kill
	case err != nil:
		c.info.Status, c.info.Error = CommandFailed, err.Error()
	default:
		c.info.Status = CommandExited
	}
	if status != "" && c.info.Status != CommandExited && c.info.Error == "" {
		c.info.Error = status
	}
	c.mu.Unlock()
	close(c.done)
}

// addCommand registers cmd in s, dropping the oldest ended commands past MaxCommands.
func (m *Manager) addCommand(s *session, cmd *command) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	running := 0
	for _, c := range s.cmds {
		select {
		case <-c.done:
		default:
			running++
		}
	}
	if running >= MaxRunningCommands {
		return Errorf(KindConflict, "session %s already runs %d commands, the most it may run at once", cmd.info.Session, running).
			WithHint("wait for one to end or kill one (DELETE /v1/sessions/{id}/commands/{cid})")
	}
	for len(s.cmds) >= MaxCommands {
		dropped := false
		for i, c := range s.cmds {
			select {
			case <-c.done:
				s.cmds = slices.Delete(s.cmds, i, i+1)
				dropped = true
			default:
				continue
			}
			break
		}
		if !dropped {
			break
		}
	}
	s.cmds = append(s.cmds, cmd)
	return nil
}

// findCommand returns command cid of session id.
func (m *Manager) findCommand(id, cid string) (*command, error) {
	s, err := m.get(id)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range s.cmds {
		if c.info.ID == cid {
			return c, nil
		}
	}
	return nil, fmt.Errorf("command %q of session %s: %w", cid, id, ErrNotFound)
}

// CommandStatus describes command cid of session id with its logs so far.
func (m *Manager) CommandStatus(id, cid string) (CommandInfo, error) {
	c, err := m.findCommand(id, cid)
	if err != nil {
		return CommandInfo{}, err
	}
	return c.snapshot(), nil
}

// Commands lists the commands session id keeps, oldest first, with their logs.
func (m *Manager) Commands(id string) ([]CommandInfo, error) {
	s, err := m.get(id)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	cmds := slices.Clone(s.cmds)
	m.mu.Unlock()
	out := make([]CommandInfo, 0, len(cmds))
	for _, c := range cmds {
		out = append(out, c.snapshot())
	}
	return out, nil
}

// KillCommand kills command cid of session id and waits (briefly) for its end. Killing a command
// that has ended changes nothing.
func (m *Manager) KillCommand(id, cid string) (CommandInfo, error) {
	c, err := m.findCommand(id, cid)
	if err != nil {
		return CommandInfo{}, err
	}
	select {
	case <-c.done:
		return c.snapshot(), nil
	default:
	}
	c.stop(CommandKilled)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
	}
	return c.snapshot(), nil
}

// Interface guards
var _ OutputSink = (*command)(nil)
