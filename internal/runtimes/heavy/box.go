package heavy

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/agentbox-dev/agentbox/internal/logtail"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/rootfs"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// box is one running sandbox: a `runsc run` process whose container's init is the guest agent,
// and the frames to and from it.
type box struct {
	id     string
	dir    string // the bundle
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	cg     *cgroups
	log    *slog.Logger
	runsc  runscCmd
	limits sandbox.Limits // what it was made with: memory and files (the overlay size)
	img    rootfs.Image
	egress boxEgress

	startTime time.Duration
	warmAt    time.Time // when it joined the warm pool (the pool measures it once settled)
	python    string
	features  []string // what the guest said it has (proto.Feature*)
	snapBase  int64    // the memory limit before snapshots raised it (timetravel.go); 0 before
	// forkAfter: the session's steps are snapshotted (a Snapshot was asked), so each session
	// cell carries its step's snapshot (proto.RunRequest.SnapAfter), or, with a guest without
	// that, asks the guest to fork right behind its report (ForkAfter).
	forkAfter bool
	restored  bool // from the template, not booted
	// pass are host files given to the sandbox's init at launch (runsc --pass-fd), each at its
	// descriptor there: a spawned child's host stdio (spawn.go).
	pass []passFD

	wmu sync.Mutex

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]*call
	broken  string // why the daemon gave up on the guest
	// gate, while set, holds new requests back: a checkpoint is being taken (quiesce).
	gate chan struct{}

	exited  chan struct{}
	exitErr error
	destroy sync.Once
	gone    chan struct{} // closed when destroyed and cleaned up

	// answered is closed when the sandbox first answers a run of its user (the pool's refill
	// after a claim waits for it).
	answered     chan struct{}
	answeredOnce sync.Once
	// claimedAt is when the sandbox was handed out (guarded by Runtime.mu; zero for one resumed
	// from a session's checkpoint).
	claimedAt time.Time

	tail logtail.Tail // runsc's and the guest's last log lines
}

// passFD is a host file a sandbox's init gets at descriptor guest.
type passFD struct {
	host  *os.File
	guest int
}

// call is a request waiting for its answer.
type call struct {
	answer chan proto.Frame
	output func(stream string, data []byte)
	// artifact, when set, takes a run's OpArtifact frames.
	artifact func(proto.Artifact)
	// command marks a command's request (OpSpawn): in flight for as long as the command runs.
	command bool
}

// runscCmd builds runsc command lines.
type runscCmd struct {
	path  string
	state string
}

func (r runscCmd) command(ctx context.Context, global []string, args ...string) *exec.Cmd {
	all := append([]string{"--root", r.state}, global...)
	return exec.CommandContext(ctx, r.path, append(all, args...)...)
}

// markAnswered records that the sandbox answered a run of its user (not the daemon's own preload
// and reseed cells).
func (b *box) markAnswered() { b.answeredOnce.Do(func() { close(b.answered) }) }

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "ab-" + hex.EncodeToString(b[:])
}

// startBox boots a sandbox of img (`runsc run`) and waits for the guest's hello. A background
// sandbox (made by the pool ahead of time) runs at the least CPU weight until it is claimed.
func (rt *Runtime) startBox(ctx context.Context, img rootfs.Image, limits sandbox.Limits, background bool, mounts ...sandbox.Mount) (*box, error) {
	start := time.Now()
	b, err := rt.newBox(img, limits, background, false, mounts...)
	if err != nil {
		return nil, err
	}
	if err := b.launch(ctx, rt, "run", nil, true); err != nil {
		return nil, err
	}
	b.startTime = time.Since(start)
	return b, nil
}

// newBox makes a sandbox's cgroup and bundle, ready to launch.
// shareTemplate: a restore from the template that shares its pages (boxSpec.shareTemplate).
func (rt *Runtime) newBox(img rootfs.Image, limits sandbox.Limits, background, shareTemplate bool, mounts ...sandbox.Mount) (*box, error) {
	id := newID()
	b := &box{
		id:       id,
		dir:      filepath.Join(rt.layout.RunDir(), id),
		log:      rt.log.With("sandbox", id),
		runsc:    rt.runsc,
		limits:   limits,
		img:      img,
		pending:  map[uint64]*call{},
		exited:   make(chan struct{}),
		gone:     make(chan struct{}),
		answered: make(chan struct{}),
	}
	spec := rt.boxSpec(img, limits)
	spec.volumes, spec.shareTemplate = mounts, shareTemplate
	var err error
	if b.cg, err = newCgroups(rt.cgroupParent, id, spec.memoryBytes, pidsLimit(spec.nproc), spec.cpuQuota); err != nil {
		return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "heavy: %v", err)
	}
	b.cg.setBackground(background)
	if err := os.MkdirAll(b.dir, 0o700); err != nil {
		b.cg.remove()
		return nil, err
	}
	spec.cgroupsPath = "/" + b.cg.path
	if err := writeSpec(b.dir, spec.spec()); err != nil {
		b.cleanup()
		return nil, err
	}
	return b, nil
}

// boxSpec is what a sandbox of img with limits is made of, but for its cgroup.
func (rt *Runtime) boxSpec(img rootfs.Image, limits sandbox.Limits) boxSpec {
	s := boxSpec{
		img:         img,
		memoryBytes: limits.MemoryBytes + limits.FilesBytes + rt.opts.RuntimeOverheadBytes,
		filesBytes:  limits.FilesBytes,
		nproc:       rt.opts.MaxProcesses,
		cpuQuota:    rt.cpuQuota(),
	}
	if !rt.opts.NoErofs {
		s.erofs = img.Erofs()
	}
	return s
}

// runscFlags are the global runsc flags of a sandbox with limits. A checkpoint is restored with
// the same flags it was taken with.
func (rt *Runtime) runscFlags(limits sandbox.Limits) []string {
	global := []string{
		"--platform=systrap",
		"--network=none",
		"--overlay2=root:memory,size=" + strconv.FormatInt(limits.FilesBytes, 10),
	}
	if rt.cpuQuota() > 0 {
		global = append(global, "--cpu-num-from-quota")
	}
	if !rt.opts.SystrapFastPath {
		global = append(global, "--systrap-disable-fast-path")
	}
	return append(global, runscExtraFlags...)
}

// runscExtraFlags are added to every runsc command's global flags: the package's measurements
// set them, and AGENTBOX_RUNSC_DEBUG_LOG=DIR/ (a diagnostic, for benches) adds --debug
// --debug-log=DIR/ (the sentry's own timings: "Kernel save took", "Memory files save took").
var runscExtraFlags = func() []string {
	if d := os.Getenv("AGENTBOX_RUNSC_DEBUG_LOG"); d != "" {
		return []string{"--debug", "--debug-log=" + d}
	}
	return nil
}()

// launch runs `runsc FLAGS verb ARGS --bundle DIR ID` with pipes of ours as the container's
// stdio. With hello, it waits for the guest's hello frame (a boot); without (a restore: the
// guest said hello before its checkpoint), the caller checks the guest answers. On failure the
// sandbox is destroyed.
func (b *box) launch(ctx context.Context, rt *Runtime, verb string, args []string, hello bool) error {
	// A restore is detached and waited for by rt.opts.RunscWait, which holds far less memory
	// than an attached `runsc restore` for the sandbox's life (cmd/agentbox-runsc-wait).
	waiter := verb == "restore" && rt.opts.RunscWait != ""
	pidFile := filepath.Join(b.dir, "sandbox.pid")
	if waiter {
		args = append([]string{"--detach", "--pid-file", pidFile}, args...)
	}
	args = append([]string{verb}, args...)
	for i, p := range b.pass {
		args = append(args, "--pass-fd", strconv.Itoa(3+i)+":"+strconv.Itoa(p.guest)) // ExtraFiles[i] is runsc's 3+i
	}
	args = append(args, "--bundle", b.dir, b.id)
	// Not tied to ctx: the sandbox outlives the request that started it (pool, session).
	b.cmd = rt.runsc.command(context.Background(), rt.runscFlags(b.limits), args...)
	if waiter {
		b.cmd.Args = append([]string{rt.opts.RunscWait, strconv.Itoa(len(b.pass)), pidFile}, b.cmd.Args...)
		b.cmd.Path = rt.opts.RunscWait
	}
	for _, p := range b.pass {
		b.cmd.ExtraFiles = append(b.cmd.ExtraFiles, p.host)
	}
	b.cmd.Dir = b.dir
	// Its own process group: a terminal's Ctrl-C reaches the daemon, which then ends sandboxes
	// in order, not runsc directly.
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Pipes of our own, not StdoutPipe: exec.Cmd.Wait closes those when runsc exits, possibly
	// before the reader has taken the guest's last frames.
	var pipes [3][2]*os.File // stdin, stdout, stderr: [read, write]
	for i := range pipes {
		r, w, err := os.Pipe()
		if err != nil {
			for _, p := range pipes[:i] {
				p[0].Close()
				p[1].Close()
			}
			b.cleanup()
			return err
		}
		pipes[i] = [2]*os.File{r, w}
	}
	b.cmd.Stdin, b.cmd.Stdout, b.cmd.Stderr = pipes[0][0], pipes[1][1], pipes[2][1]
	b.stdin = pipes[0][1]
	out, errPipe := pipes[1][0], pipes[2][0]
	err := startBatch(b.cmd) // schedbatch_linux.go: a waking sandbox does not preempt the daemon
	pipes[0][0].Close()
	pipes[1][1].Close()
	pipes[2][1].Close()
	if err != nil {
		b.stdin.Close()
		out.Close()
		errPipe.Close()
		b.cleanup()
		return sandbox.Errorf(sandbox.KindRuntimeUnavailable, "heavy: start runsc: %v", err)
	}
	b.egress.mux = b.newTunnel(rt.opts.Egress)
	go b.logStderr(errPipe)
	go func() {
		b.exitErr = b.cmd.Wait()
		close(b.exited)
	}()
	ready := make(chan error, 1)
	go func() {
		defer out.Close()
		b.read(bufio.NewReaderSize(out, 256<<10), hello, ready)
	}()
	if !hello {
		return nil
	}
	timer := time.NewTimer(rt.opts.StartTimeout)
	defer timer.Stop()
	select {
	case err = <-ready:
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = fmt.Errorf("no hello from the guest within %v", rt.opts.StartTimeout)
	}
	if err != nil {
		b.kill()
		return sandbox.Errorf(sandbox.KindRuntimeUnavailable, "heavy: the sandbox did not start: %v (%s)", err, b.tail.String()).
			WithHint("check `agentbox image list` and that runsc works: %s", rt.runsc.path)
	}
	return nil
}

// read consumes the guest's frames. With hello, the first must be a hello of our protocol
// version, and ready gets its outcome; a restored guest sends none.
func (b *box) read(r io.Reader, hello bool, ready chan<- error) {
	first := hello
	for {
		var f proto.Frame
		err := proto.Read(r, &f, proto.MaxFrame)
		if err != nil {
			if first {
				<-b.exited
				ready <- fmt.Errorf("runsc exited (%v)", b.exitErr)
			} else if !errors.Is(err, io.EOF) {
				b.fail("bad frame: " + err.Error())
			}
			b.failPending()
			return
		}
		if first {
			first = false
			if f.Op != proto.OpHello || f.Version != proto.Version {
				ready <- fmt.Errorf("the image's guest speaks %s version %d, this daemon speaks version %d: rebuild the image (agentbox image build NAME; instant when its recipe is unchanged)", f.Op, f.Version, proto.Version)
				b.fail("wrong hello")
				b.failPending()
				return
			}
			b.python, b.features = f.PythonVersion, f.Features
			ready <- nil
			continue
		}
		if t, ok := f.AsTunnel(); ok {
			if err := b.egress.mux.Handle(t); err != nil {
				b.fail(err.Error())
				b.failPending()
				return
			}
			continue
		}
		b.mu.Lock()
		c := b.pending[f.ID]
		if c != nil && f.Op != proto.OpOutput && f.Op != proto.OpArtifact {
			delete(b.pending, f.ID)
		}
		b.mu.Unlock()
		if c == nil {
			b.fail(fmt.Sprintf("a %s frame for request %d, which is not pending", f.Op, f.ID))
			b.failPending()
			return
		}
		if f.Op == proto.OpOutput {
			if c.output != nil {
				c.output(f.Stream, f.Data)
			}
			continue
		}
		if f.Op == proto.OpArtifact {
			if c.artifact != nil && f.Artifact != nil {
				c.artifact(*f.Artifact)
			}
			continue
		}
		c.answer <- f
	}
}

// fail gives up on a guest that broke the protocol: the sandbox is destroyed.
func (b *box) fail(why string) {
	b.mu.Lock()
	if b.broken == "" {
		b.broken = why
	}
	b.mu.Unlock()
	b.log.Error("heavy: guest broke the protocol, destroying its sandbox", "why", why)
	go b.kill()
}

// failPending wakes every waiting request: the guest is gone.
func (b *box) failPending() {
	if b.egress.mux != nil {
		b.egress.mux.Close(nil)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, c := range b.pending {
		close(c.answer)
		delete(b.pending, id)
	}
	if b.broken == "" {
		b.broken = "the guest ended"
	}
}

// send registers a request and writes it; the answer comes on the returned call.
func (b *box) send(f *proto.Frame, output func(string, []byte)) (*call, error) {
	return b.sendCall(f, &call{output: output})
}

// sendCall is send with the call's handlers given.
func (b *box) sendCall(f *proto.Frame, c *call) (*call, error) {
	id, err := b.register(c)
	if err != nil {
		return nil, err
	}
	f.ID = id
	if err := b.write(f); err != nil {
		b.unregister(id)
		return nil, err
	}
	return c, nil
}

// unregister forgets a pending request whose frame could not be written.
func (b *box) unregister(id uint64) {
	b.mu.Lock()
	delete(b.pending, id)
	b.mu.Unlock()
}

// register makes c a pending request and returns its ID; the caller writes the frame that asks
// for it (sendCall), or one that names the ID in its body (a run's SnapAfter).
func (b *box) register(c *call) (uint64, error) {
	b.mu.Lock()
	for b.gate != nil { // a checkpoint is being taken (durable.go): wait for its end
		g := b.gate
		b.mu.Unlock()
		<-g
		b.mu.Lock()
	}
	if b.broken != "" {
		why := b.broken
		b.mu.Unlock()
		return 0, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the sandbox has ended (%s)", why)
	}
	b.nextID++
	id := b.nextID
	c.answer = make(chan proto.Frame, 1)
	b.pending[id] = c
	b.mu.Unlock()
	return id, nil
}

func (b *box) write(f *proto.Frame) error {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	if err := proto.Write(b.stdin, f); err != nil {
		go b.kill()
		return sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the sandbox stopped taking requests: %v", err)
	}
	return nil
}

// request sends f and waits for its one answer.
func (b *box) request(ctx context.Context, f *proto.Frame) (proto.Frame, error) {
	c, err := b.send(f, nil)
	if err != nil {
		return proto.Frame{}, err
	}
	return b.await(ctx, c)
}

// await waits for the one answer of pending request c.
func (b *box) await(ctx context.Context, c *call) (proto.Frame, error) {
	select {
	case ans, ok := <-c.answer:
		if !ok {
			return proto.Frame{}, b.deadErr()
		}
		if ans.Op == proto.OpError && ans.Error != nil {
			return ans, &sandbox.Error{Kind: ans.Error.Kind, Message: ans.Error.Message}
		}
		return ans, nil
	case <-ctx.Done():
		return proto.Frame{}, sandbox.Errorf(sandbox.KindTimeout, "the request was cancelled: %v", ctx.Err())
	}
}

// quiesce holds new requests back while a checkpoint is taken, if none is in flight (an answer
// or a command's output would otherwise be in the checkpoint, and a restored guest would send it
// to a daemon that never asked): it reports whether it did; reopen lets requests go again.
func (b *box) quiesce() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) > 0 || b.gate != nil || b.broken != "" {
		return false
	}
	b.gate = make(chan struct{})
	return true
}

// quiesceWithin is quiesce once the requests in flight have their answers, waiting up to wait
// for that; false if a command is among them (it may never end), the sandbox ended, or ctx did.
func (b *box) quiesceWithin(ctx context.Context, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for !b.quiesce() {
		if b.commandsRunning() > 0 || !b.alive() || ctx.Err() != nil || time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// commandsRunning counts the commands in flight in the sandbox (each an OpSpawn request that
// stays pending until the command ends).
func (b *box) commandsRunning() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, c := range b.pending {
		if c.command {
			n++
		}
	}
	return n
}

func (b *box) reopen() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gate != nil {
		close(b.gate)
		b.gate = nil
	}
}

func (b *box) alive() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.broken == ""
}

// deadErr describes a sandbox that ended under a request.
func (b *box) deadErr() error {
	select {
	case <-b.exited:
	case <-time.After(time.Second):
	}
	b.mu.Lock()
	why := b.broken
	b.mu.Unlock()
	return sandbox.Errorf(sandbox.KindRuntimeUnavailable, "the heavy sandbox ended (%s; runsc: %v): %s", why, b.exitErr, b.tail.String())
}

// kill destroys the sandbox: the guest's stdin is closed (it exits, and with it the sandbox), and
// if runsc has not ended within a second it is killed and its container deleted. Then the
// bundle and the cgroup are removed. Safe to call more than once; returns when all is gone.
func (b *box) kill() {
	b.destroy.Do(func() {
		b.mu.Lock()
		if b.broken == "" {
			b.broken = "destroyed"
		}
		b.mu.Unlock()
		// Tearing down takes CPU that a claimed sandbox may be waiting for (cpuweight.go).
		b.cg.setBackground(true)
		if b.stdin != nil {
			_ = b.stdin.Close()
		}
		if b.cmd != nil && b.cmd.Process != nil {
			select {
			case <-b.exited:
			case <-time.After(time.Second):
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_ = b.runsc.command(ctx, nil, "kill", "--all", b.id, "KILL").Run()
				cancel()
				select {
				case <-b.exited:
				case <-time.After(5 * time.Second):
					_ = b.cmd.Process.Kill()
					<-b.exited
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = b.runsc.command(ctx, nil, "delete", "--force", b.id).Run() // usually gone already
			cancel()
		}
		b.cleanup()
		close(b.gone)
	})
	<-b.gone
}

func (b *box) cleanup() {
	if b.cg != nil {
		b.cg.remove()
	}
	_ = os.RemoveAll(b.dir)
}

func (b *box) logStderr(r io.ReadCloser) {
	defer r.Close()
	b.tail.Follow(r, func(line string) {
		// The guest's own complaints about the way out (a connection it accepted and had to
		// close) are warnings: the code saw only a proxy that hung up.
		if strings.HasPrefix(line, "agentbox-guest: egress:") {
			b.warnRefused("heavy sandbox: " + line)
			return
		}
		b.log.Debug("heavy sandbox: " + line)
	})
}
