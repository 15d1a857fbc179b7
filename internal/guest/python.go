//go:build linux

package guest

import (
	"bufio"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/guest/pyerror"
)

//go:embed repl.py
var replTemplate string

//go:embed chart.py
var chartSource string

// replSource is the -c argument of Python: repl.py with the shared exception formatter and
// chart.py in it.
var replSource = inlineChart(pyerror.MustInline(replTemplate))

// inlineChart puts chart.py into the REPL as the string CHART_SOURCE (a JSON string is a Python
// string literal).
func inlineChart(repl string) string {
	lit, err := json.Marshal(chartSource)
	if err != nil || !strings.Contains(repl, "\n# @CHART@\n") {
		panic("guest: repl.py has no # @CHART@ line for chart.py")
	}
	return strings.Replace(repl, "\n# @CHART@\n", "\nCHART_SOURCE = "+string(lit)+"\n", 1)
}

// python is one Python process and the pipes to it. The pipes are shared with the process's
// parked snapshots (snaps.go): a snapshot woken by a rewind goes on with the same pipes, so the
// pump and the agent's ends never change while the snapshots live.
type python struct {
	pid     int
	version string
	*pipes
	exited chan struct{} // closed by the reaper
	status unix.WaitStatus
	once   sync.Once
	// parkedHolds is, for a parked snapshot's process, what a read of its descriptors found
	// (holdsUnknown until one): it runs nothing while parked, so it holds what it held then
	// (guarded by agent.mu; snaps.go, mappedHere).
	parkedHolds holds
}

// pipes are the agent's ends of a Python process's pipes.
type pipes struct {
	req     *rawFile // fd 3 of the process: requests
	reports chan map[string]json.RawMessage
	pumped  chan struct{} // closed when the pump has forwarded everything the processes wrote
	closed  sync.Once
}

// close closes the agent's ends: the processes on these pipes read EOF.
func (p *pipes) close() {
	p.closed.Do(func() {
		p.req.Close()
	})
}

// startPython starts repl.py as the unprivileged user and waits for it to be ready.
func (a *agent) startPython() (*python, error) {
	// stdin: the child has its end; the parent closes the write end at once: the code has no
	// stdin, so input() and sys.stdin.read() meet EOF at once (EOFError), as a script run with
	// stdin closed does, instead of waiting for the timeout.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stdinW.Close()
	defer stdinR.Close()
	// stdout, stderr, reports (read by the agent) and requests (written by it): the agent's ends
	// are read and written with raw system calls (rawio.go).
	var mine [4]*rawFile
	var theirs [4]*os.File
	closeAll := func() {
		for i := range mine {
			if mine[i] != nil {
				mine[i].Close()
			}
		}
	}
	// The child's ends are closed as soon as it has them (or could not start): while the agent
	// holds a write end, the pump never sees the end of that pipe, and a process that exits
	// before it is ready would be waited for (pumped) for good.
	closeTheirs := func() {
		for i, f := range theirs {
			if f != nil {
				f.Close()
				theirs[i] = nil
			}
		}
	}
	defer closeTheirs()
	for i := range mine {
		if mine[i], theirs[i], err = pollPipe(i != 3); err != nil {
			closeAll()
			return nil, err
		}
	}
	childFds := []uintptr{stdinR.Fd(), theirs[0].Fd(), theirs[1].Fd(), theirs[3].Fd(), theirs[2].Fd()}
	attr := &syscall.ProcAttr{
		Dir:   a.cfg.WorkDir,
		Env:   a.cfg.Env,
		Files: childFds,
		Sys: &syscall.SysProcAttr{
			Setpgid:    true,
			Credential: &syscall.Credential{Uid: uint32(a.cfg.UID), Gid: uint32(a.cfg.GID), Groups: []uint32{}},
			Pdeathsig:  syscall.SIGKILL,
		},
	}
	py := &python{
		pipes: &pipes{
			req:     mine[3],
			reports: make(chan map[string]json.RawMessage, 4),
			pumped:  make(chan struct{}),
		},
		exited: make(chan struct{}),
	}
	pid, err := a.reaper.start(func() (int, error) {
		return syscall.ForkExec(a.cfg.Python, []string{"python3", "-c", replSource}, attr)
	}, py)
	stdinR.Close()
	closeTheirs()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("start %s: %w", a.cfg.Python, err)
	}
	py.pid = pid
	go a.pump(py.pipes, mine[0], mine[1], mine[2])
	select {
	case rep := <-py.reports:
		var v string
		if err := json.Unmarshal(rep["ready"], &v); err != nil {
			py.kill()
			return nil, fmt.Errorf("python sent %v before it was ready", rep)
		}
		py.version = v
		return py, nil
	case <-py.exited:
		py.pipes.close()
		<-py.pumped
		return nil, fmt.Errorf("python exited before it was ready (%s)", describeStatus(py.status))
	case <-time.After(60 * time.Second):
		py.kill()
		return nil, errors.New("python did not become ready within 60s")
	}
}

// send hands a request to the REPL.
func (py *python) send(msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	buf := make([]byte, 4+len(b))
	binary.LittleEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	_, err = py.req.Write(buf)
	return err
}

// interrupt raises KeyboardInterrupt in the running cell; children in the process group get
// SIGINT as from a terminal.
func (py *python) interrupt() { _ = syscall.Kill(-py.pid, syscall.SIGINT) }

// kill ends the process group, closes the pipes and waits for the process to be reaped.
func (py *python) kill() {
	py.end()
	py.pipes.close()
}

// end ends the process group and waits for the process to be reaped; the pipes stay open for
// the snapshots that share them.
func (py *python) end() {
	py.once.Do(func() {
		_ = syscall.Kill(-py.pid, syscall.SIGKILL)
		_ = syscall.Kill(py.pid, syscall.SIGKILL)
	})
	select {
	case <-py.exited:
	case <-time.After(5 * time.Second):
		log.Printf("python %d did not exit after SIGKILL", py.pid)
	}
}

func (py *python) alive() bool {
	select {
	case <-py.exited:
		return false
	default:
		return true
	}
}

func describeStatus(ws unix.WaitStatus) string {
	switch {
	case ws.Signaled():
		return "killed by signal " + ws.Signal().String()
	case ws.Exited():
		return fmt.Sprintf("exit status %d", ws.ExitStatus())
	}
	return fmt.Sprintf("status %#x", uint32(ws))
}

// exitCode is the exit code a shell would report.
func exitCode(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// pump forwards the process's stdout and stderr to the run in progress and its reports to
// py.reports. It reads output before reports: everything a cell printed is in the pipes before
// its report is written, so when a report is readable, the bytes buffered in the pipes at that
// moment are read first (FIONREAD), and output printed after (by threads or children of the
// cell) cannot hold the report back. Each pipe has a goroutine waiting in Go's poller
// (rawio.go); a chunk of output is read and forwarded under outMu, which the reports' goroutine
// takes to read what is buffered before a report, so no chunk read earlier is forwarded after it.
func (a *agent) pump(py *pipes, stdout, stderr, reports *rawFile) {
	streams := [2]string{"stdout", "stderr"}
	files := [2]*rawFile{stdout, stderr}
	var fds [2]int
	for i, f := range files {
		_ = f.rc.Control(func(fd uintptr) { fds[i] = int(fd) })
	}
	var outMu sync.Mutex
	var ended [2]bool // guarded by outMu
	var buf [2][]byte
	// readSome reads up to max bytes of output i and forwards them; false at EOF (or an error),
	// and with eagain when nothing was there. outMu held.
	readSome := func(i, max int) (more, eagain bool) {
		if ended[i] {
			return false, false
		}
		if buf[i] == nil {
			buf[i] = make([]byte, 64<<10)
		}
		n, errno := rawRead(fds[i], buf[i][:min(max, len(buf[i]))])
		switch {
		case errno == unix.EAGAIN:
			return true, true
		case errno != 0 || n == 0:
			ended[i] = true
			return false, false
		}
		a.output(streams[i], buf[i][:n])
		return true, false
	}
	var wg sync.WaitGroup
	for i := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for more := true; more; {
				err := files[i].rc.Read(func(uintptr) bool {
					outMu.Lock()
					defer outMu.Unlock()
					var eagain bool
					more, eagain = readSome(i, 64<<10)
					return !eagain
				})
				if err != nil {
					return
				}
			}
		}()
	}
	// The reports: the first byte of each is waited for (read with what follows it in the pipe),
	// then what the outputs hold is read.
	br := bufio.NewReaderSize(reports, 64<<10)
	for {
		var hdr [4]byte
		var err error
		if hdr[0], err = br.ReadByte(); err != nil {
			break
		}
		outMu.Lock()
		for i := range files {
			inq, errno := rawInq(fds[i])
			for errno == 0 && inq > 0 {
				before := inq
				if more, eagain := readSome(i, inq); !more || eagain {
					break
				}
				inq, errno = rawInq(fds[i])
				if inq >= before {
					break // someone is still writing: what was there is read
				}
			}
		}
		outMu.Unlock()
		rep, err := readReport(br, hdr)
		if err != nil {
			break
		}
		py.reports <- rep
	}
	wg.Wait()
	stdout.Close()
	stderr.Close()
	reports.Close()
	close(py.pumped)
}

// readReport reads the rest of one length-prefixed JSON report of the REPL, whose first byte is
// in hdr.
func readReport(r io.Reader, hdr [4]byte) (map[string]json.RawMessage, error) {
	if _, err := io.ReadFull(r, hdr[1:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n > 64<<20 {
		return nil, fmt.Errorf("report of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// reaper reaps every child, as init must: the Python process (whose status it hands over) and
// any orphan reparented to the agent.
type reaper struct {
	mu      sync.Mutex
	waiters map[int]*python
}

var (
	theReaper  *reaper
	reaperOnce sync.Once
)

// newReaper returns the process's one reaper: two would steal each other's children.
func newReaper() *reaper {
	reaperOnce.Do(func() { theReaper = startReaper() })
	return theReaper
}

func startReaper() *reaper {
	r := &reaper{waiters: map[int]*python{}}
	sig := make(chan os.Signal, 16)
	signal.Notify(sig, syscall.SIGCHLD)
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-sig:
			case <-tick.C:
			}
			r.reap()
		}
	}()
	return r
}

// watch registers a process the agent did not start itself (a parked snapshot, a child of the
// Python process): it is reaped here once its parent has ended and it is the agent's orphan.
func (r *reaper) watch(pid int, py *python) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiters[pid] = py
}

// start runs fork under the reaper's lock, so the child cannot be reaped before it is known.
func (r *reaper) start(fork func() (int, error), py *python) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := fork()
	if err == nil {
		r.waiters[pid] = py
	}
	return pid, err
}

func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		if py, ok := r.waiters[pid]; ok {
			delete(r.waiters, pid)
			py.status = ws
			close(py.exited)
		}
	}
}
