//go:build linux

package guest

import (
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
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
}

// pipes are the agent's ends of a Python process's pipes.
type pipes struct {
	req     *os.File // fd 3 of the process: requests
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
	var files [5][2]*os.File // stdin, stdout, stderr, requests, reports: [read, write]
	defer func() {
		// The child has its ends; the parent keeps the others but the write end of stdin, which
		// it closes too: the code has no stdin, so input() and sys.stdin.read() meet EOF at once
		// (EOFError), as a script run with stdin closed does, instead of waiting for the timeout.
		for _, f := range []*os.File{files[0][0], files[0][1], files[1][1], files[2][1], files[3][0], files[4][1]} {
			if f != nil {
				f.Close()
			}
		}
	}()
	for i := range files {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		files[i] = [2]*os.File{r, w}
	}
	childFds := []uintptr{files[0][0].Fd(), files[1][1].Fd(), files[2][1].Fd(), files[3][0].Fd(), files[4][1].Fd()}
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
			req:     files[3][1],
			reports: make(chan map[string]json.RawMessage, 4),
			pumped:  make(chan struct{}),
		},
		exited: make(chan struct{}),
	}
	pid, err := a.reaper.start(func() (int, error) {
		return syscall.ForkExec(a.cfg.Python, []string{"python3", "-c", replSource}, attr)
	}, py)
	if err != nil {
		for _, f := range []*os.File{files[1][0], files[2][0], files[3][1], files[4][0]} {
			f.Close()
		}
		return nil, fmt.Errorf("start %s: %w", a.cfg.Python, err)
	}
	py.pid = pid
	go a.pump(py.pipes, files[1][0], files[2][0], files[4][0])
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
// cell) cannot hold the report back.
func (a *agent) pump(py *pipes, stdout, stderr, reports *os.File) {
	defer close(py.pumped)
	defer stdout.Close()
	defer stderr.Close()
	defer reports.Close()
	streams := []string{"stdout", "stderr"}
	fds := []unix.PollFd{
		{Fd: int32(stdout.Fd()), Events: unix.POLLIN},
		{Fd: int32(stderr.Fd()), Events: unix.POLLIN},
		{Fd: int32(reports.Fd()), Events: unix.POLLIN},
	}
	buf := make([]byte, 64<<10)
	// readSome reads up to max bytes of output fd i; it reports false at EOF.
	readSome := func(i int, max int) bool {
		if max > len(buf) {
			max = len(buf)
		}
		n, err := unix.Read(int(fds[i].Fd), buf[:max])
		if n > 0 {
			a.output(streams[i], buf[:n])
			return true
		}
		if err == unix.EINTR || err == unix.EAGAIN {
			return true
		}
		fds[i].Fd = -1 // EOF or error: poll ignores negative fds
		return false
	}
	for fds[0].Fd >= 0 || fds[1].Fd >= 0 || fds[2].Fd >= 0 {
		if _, err := unix.Poll(fds, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			log.Printf("poll: %v", err)
			return
		}
		if fds[2].Fd >= 0 && fds[2].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) != 0 {
			for i := 0; i < 2; i++ {
				if fds[i].Fd < 0 {
					continue
				}
				n, err := unix.IoctlGetInt(int(fds[i].Fd), unix.TIOCINQ)
				for err == nil && n > 0 {
					before := n
					if !readSome(i, n) {
						break
					}
					n, err = unix.IoctlGetInt(int(fds[i].Fd), unix.TIOCINQ)
					if n >= before {
						break // someone is still writing: what was there is read
					}
				}
			}
			rep, err := readReport(int(fds[2].Fd))
			if err != nil {
				fds[2].Fd = -1
				continue
			}
			py.reports <- rep
			continue
		}
		for i := 0; i < 2; i++ {
			if fds[i].Fd >= 0 && fds[i].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) != 0 {
				readSome(i, len(buf))
			}
		}
	}
}

// readReport reads one length-prefixed JSON report of the REPL.
func readReport(fd int) (map[string]json.RawMessage, error) {
	var hdr [4]byte
	if err := readFull(fd, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n > 64<<20 {
		return nil, fmt.Errorf("report of %d bytes", n)
	}
	b := make([]byte, n)
	if err := readFull(fd, b); err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

func readFull(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Read(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return errors.New("EOF")
		}
		b = b[n:]
	}
	return nil
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
