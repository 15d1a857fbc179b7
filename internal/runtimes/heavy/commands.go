package heavy

import (
	"context"
	"sync"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Commands in a session's sandbox reuse the guest's child processes (OpSpawn, the hosted MCP
// servers' way): the guest starts the command as the sandbox's user with the sandbox's
// environment, streams its stdout and stderr as OpOutput frames, feeds OpStdin to it, kills its
// process group on OpKill and answers OpExit when it has ended. The working directory is set by a
// small shell prefix, so the guest protocol stays as it is.

// cdAndExec runs "$2..." in the directory "$1".
const cdAndExec = `cd -- "$1" || exit 126; shift; exec "$@"`

// StartCommand starts spec in the session's sandbox (sandbox.SessionCommands).
func (s *session) StartCommand(ctx context.Context, spec sandbox.CommandSpec, out sandbox.OutputSink) (sandbox.Process, error) {
	b, err := s.use(ctx)
	if err != nil {
		return nil, err
	}
	if !b.alive() {
		return nil, sandbox.Errorf(sandbox.KindConflict, "this session's sandbox has ended; its state is gone").
			WithHint("close this session and create a new one")
	}
	argv := append([]string{"/bin/sh", "-c", cdAndExec, "sh", spec.Dir}, spec.Argv...)
	f := &proto.Frame{Op: proto.OpSpawn, Spawn: &proto.SpawnRequest{Argv: argv, Env: b.envFor(spec.Env), StderrBytes: spec.StderrBytes}}
	p := &process{b: b, done: make(chan struct{})}
	c, err := b.sendCall(f, &call{command: true, output: func(stream string, data []byte) {
		if stream == proto.Stderr {
			out.Write(sandbox.StreamStderr, data)
		} else {
			out.Write(sandbox.StreamStdout, data)
		}
	}})
	if err != nil {
		return nil, err
	}
	p.id = f.ID
	go func() {
		ans, ok := <-c.answer
		p.mu.Lock()
		switch {
		case !ok:
			p.code, p.err = -1, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the session's sandbox ended under the command")
		case ans.Op == proto.OpError && ans.Error != nil:
			p.code, p.err = -1, &sandbox.Error{Kind: ans.Error.Kind, Message: ans.Error.Message}
		default:
			p.code, p.status = ans.ExitCode, ans.Status
		}
		p.mu.Unlock()
		close(p.done)
	}()
	if len(spec.Stdin) > 0 {
		if err := b.write(&proto.Frame{Op: proto.OpStdin, ID: p.id, Data: spec.Stdin}); err != nil {
			_ = p.Kill()
			return p, nil // its end says what happened
		}
	}
	if !spec.OpenStdin {
		_ = b.write(&proto.Frame{Op: proto.OpStdin, ID: p.id, Close: true})
	}
	return p, nil
}

// WriteStdin feeds the command's stdin (sandbox.ProcessStdin). The Manager keeps what a command
// is given within a pipe's buffer, so the guest's write of it does not wait on the command.
func (p *process) WriteStdin(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	return p.b.write(&proto.Frame{Op: proto.OpStdin, ID: p.id, Data: data})
}

// CloseStdin closes the command's stdin.
func (p *process) CloseStdin() error {
	return p.b.write(&proto.Frame{Op: proto.OpStdin, ID: p.id, Close: true})
}

// process is a command running in a session's sandbox.
type process struct {
	b    *box
	id   uint64
	done chan struct{}

	mu     sync.Mutex
	code   int
	status string
	err    error
}

func (p *process) Done() <-chan struct{} { return p.done }

func (p *process) Exit() (int, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code, p.status, p.err
}

func (p *process) Kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	return p.b.write(&proto.Frame{Op: proto.OpKill, ID: p.id})
}

// Interface guards
var (
	_ sandbox.SessionCommands = (*session)(nil)
	_ sandbox.Process         = (*process)(nil)
	_ sandbox.ProcessStdin    = (*process)(nil)
)
