package heavy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// SpawnOptions say what long-lived process to run in a sandbox of its own.
type SpawnOptions struct {
	// Image names the image; empty: the runtime's default.
	Image string
	// Argv is the command line inside the sandbox.
	Argv []string
	Env  map[string]string
	// Session names the sandbox to the egress gateway (its audit records); Profile is its egress
	// profile, empty for no network at all.
	Session, Profile string
	// Limits are the sandbox's limits; zero: the runtime's defaults.
	Limits sandbox.Limits
}

// Process is a child process with piped stdio in a heavy sandbox of its own (a hosted MCP
// server): Read is its stdout, Write its stdin. Close ends the process and its sandbox.
//
// Its stdin and stdout are host pipes passed into the sandbox (proto.FeatureHostStdio): the
// sentry reads and writes them for the child, so a message crosses the boundary without the
// guest agent, its frames or a goroutine of the daemon in between. With an image whose guest
// predates that, they are OpStdin and OpOutput frames over the guest channel.
type Process struct {
	b  *box
	id uint64
	// stdin and stdout are the daemon's ends of the host pipes; nil when the stdio is framed.
	stdin, stdout *os.File
	// out and outW carry framed stdout.
	out    *io.PipeReader
	outW   *io.PipeWriter
	errMu  sync.Mutex
	stderr []byte // its last 2 KiB
	done   chan struct{}
	exit   proto.Frame
	once   sync.Once
	// ImageHash is the hash of the image the process runs in.
	ImageHash string
}

// Spawn boots a sandbox of opts.Image (not one of the warm pool's: a hosted server keeps its
// sandbox) and starts opts.Argv in it.
func (rt *Runtime) Spawn(ctx context.Context, opts SpawnOptions) (*Process, error) {
	img, err := rt.pick(nil, opts.Image)
	if err != nil {
		return nil, err
	}
	if opts.Profile != "" {
		if err := rt.checkEgress(opts.Profile); err != nil {
			return nil, err
		}
	}
	limits := opts.Limits
	if limits.MemoryBytes == 0 {
		limits = rt.opts.DefaultLimits
	}
	start := time.Now()
	b, err := rt.newBox(img, limits, false, false)
	if err != nil {
		return nil, err
	}
	// The child's stdin and stdout: the sandbox's ends go in at launch, the daemon keeps the
	// others. A guest without FeatureHostStdio leaves them unused.
	inR, inW, err := os.Pipe()
	if err != nil {
		b.cleanup()
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		b.cleanup()
		return nil, err
	}
	b.pass = []passFD{{host: inR, guest: proto.HostStdinFD}, {host: outW, guest: proto.HostStdoutFD}}
	err = b.launch(ctx, rt, "run", nil, true)
	inR.Close() // runsc has them now
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	b.startTime = time.Since(start)
	p := &Process{b: b, done: make(chan struct{}), ImageHash: img.Manifest.Hash}
	if b.can(proto.FeatureHostStdio) {
		p.stdin, p.stdout = inW, outR
	} else {
		inW.Close()
		outR.Close()
		p.out, p.outW = io.Pipe()
	}
	env := opts.Env
	if opts.Profile != "" {
		if err := rt.enableEgress(ctx, b, opts.Session, opts.Profile); err != nil {
			p.closeFiles()
			b.kill()
			return nil, err
		}
		env = b.envFor(env)
	}
	req := &proto.Frame{Op: proto.OpSpawn, Spawn: &proto.SpawnRequest{Argv: opts.Argv, Env: env, StderrBytes: 1 << 20, HostStdio: p.stdout != nil}}
	c, err := b.send(req,
		func(stream string, data []byte) {
			if stream == proto.Stdout {
				if p.outW != nil {
					_, _ = p.outW.Write(data) // blocks until read: the server's stdout is back-pressured
				}
				return
			}
			p.errMu.Lock()
			p.stderr = append(p.stderr, data...)
			if len(p.stderr) > 2048 {
				p.stderr = p.stderr[len(p.stderr)-2048:]
			}
			p.errMu.Unlock()
		})
	if err != nil {
		p.closeFiles()
		b.kill()
		return nil, err
	}
	p.id = req.ID // set by send
	go func() {
		ans, ok := <-c.answer
		if !ok {
			p.exit = proto.Frame{Op: proto.OpError, Error: &proto.Error{Kind: sandbox.KindRuntimeUnavailable, Message: "the sandbox ended"}}
		} else {
			p.exit = ans
		}
		close(p.done)
		if p.outW != nil {
			p.outW.CloseWithError(p.exitErr())
			return
		}
		// runsc holds the host pipe's other end as long as the sandbox lives, so the end of
		// the child shows as no more bytes, not as EOF: what it wrote before it ended is read,
		// then Read says how it ended.
		_ = p.stdout.SetReadDeadline(time.Now().Add(exitDrain))
	}()
	return p, nil
}

// exitDrain is how long a Read still takes what a child wrote on its host stdout before it
// ended (its bytes are in the pipe by then; this only bounds a child that left a process
// holding the pipe).
const exitDrain = 100 * time.Millisecond

// closeFiles closes the daemon's ends of the host pipes.
func (p *Process) closeFiles() {
	if p.stdin != nil {
		p.stdin.Close()
		p.stdout.Close()
	}
}

func (p *Process) exitErr() error {
	f := p.exit
	if f.Op == proto.OpError && f.Error != nil {
		return &sandbox.Error{Kind: f.Error.Kind, Message: f.Error.Message}
	}
	return sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the process exited (%s)%s", f.Status, p.stderrTail())
}

func (p *Process) stderrTail() string {
	if s := p.Stderr(); s != "" {
		return ": " + s
	}
	return ""
}

// Read reads the process's stdout; at its end it returns an error saying how it ended.
func (p *Process) Read(b []byte) (int, error) {
	if p.stdout == nil {
		return p.out.Read(b)
	}
	n, err := p.stdout.Read(b)
	if err != nil {
		select {
		case <-p.done:
			return n, p.exitErr()
		default:
		}
		if errors.Is(err, os.ErrClosed) {
			return n, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the process was closed")
		}
	}
	return n, err
}

// Write writes to the process's stdin.
func (p *Process) Write(b []byte) (int, error) {
	select {
	case <-p.done:
		return 0, p.exitErr()
	default:
	}
	if p.stdin != nil {
		n, err := p.stdin.Write(b)
		if err != nil {
			select {
			case <-p.done:
				return n, p.exitErr()
			default:
			}
		}
		return n, err
	}
	if err := p.b.write(&proto.Frame{Op: proto.OpStdin, ID: p.id, Data: append([]byte(nil), b...)}); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Done is closed when the process has ended; Err then says how.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err says how the process ended (nil while it runs).
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.exitErr()
	default:
		return nil
	}
}

// Stderr returns the last lines the process wrote on stderr.
func (p *Process) Stderr() string {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	return strings.TrimSpace(string(p.stderr))
}

// Kill ends the process but not its sandbox (tests: a server that crashes).
func (p *Process) Kill() error { return p.b.write(&proto.Frame{Op: proto.OpKill, ID: p.id}) }

// Close ends the process and destroys its sandbox.
func (p *Process) Close() error {
	p.once.Do(func() {
		_ = p.b.write(&proto.Frame{Op: proto.OpKill, ID: p.id})
		p.b.kill()
		if p.out != nil {
			p.out.CloseWithError(fmt.Errorf("closed"))
		}
		p.closeFiles()
	})
	return nil
}
