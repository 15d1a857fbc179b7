//go:build linux

package guest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// child is a long-lived process started by OpSpawn (a hosted MCP server): its stdin is fed by
// OpStdin frames, its stdout and stderr go back as OpOutput frames of the spawn's ID.
type child struct {
	id    uint64
	proc  *python // only pid, exited and status are used: the reaper's waiter
	stdin *os.File
}

// spawn starts the child; the answer is OpExit (or OpError), sent when it has ended.
func (a *agent) spawn(id uint64, req *proto.SpawnRequest) error {
	if req == nil || len(req.Argv) == 0 {
		return a.fail(id, sandbox.KindInvalidRequest, "spawn without a command")
	}
	a.mu.Lock()
	if a.children == nil {
		a.children = map[uint64]*child{}
	}
	_, dup := a.children[id]
	a.mu.Unlock()
	if dup {
		return a.fail(id, sandbox.KindConflict, "a process of this request already runs")
	}
	env := append([]string(nil), a.cfg.Env...)
	for k, v := range req.Env {
		env = append(env, k+"="+v)
	}
	path := req.Argv[0]
	if !strings.Contains(path, "/") {
		for _, dir := range []string{"/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin"} {
			if st, err := os.Stat(dir + "/" + path); err == nil && st.Mode().IsRegular() {
				path = dir + "/" + path
				break
			}
		}
	}
	if _, err := exec.LookPath(path); err != nil {
		return a.fail(id, sandbox.KindInvalidRequest, fmt.Sprintf("spawn: %s: not found in the image", req.Argv[0]))
	}
	var files [3][2]*os.File
	hostStdio := req.HostStdio
	if hostStdio {
		in, out := a.takeHostStdio()
		if in == nil {
			return a.fail(id, sandbox.KindConflict, "spawn: this sandbox has no host stdio to give (none was passed in, or another child has it)")
		}
		// [0][1] and [1][0] are the daemon's ends, on the host.
		files[0][0], files[1][1] = in, out
	}
	for i := range files {
		if hostStdio && i < 2 {
			continue
		}
		r, w, err := os.Pipe()
		if err != nil {
			for _, f := range files[:i] {
				f[0].Close()
				if f[1] != nil {
					f[1].Close()
				}
			}
			return a.fail(id, sandbox.KindInternal, err.Error())
		}
		files[i] = [2]*os.File{r, w}
	}
	attr := &syscall.ProcAttr{
		Dir:   a.cfg.WorkDir,
		Env:   env,
		Files: []uintptr{files[0][0].Fd(), files[1][1].Fd(), files[2][1].Fd()},
		Sys: &syscall.SysProcAttr{
			Setpgid:    true,
			Credential: &syscall.Credential{Uid: uint32(a.cfg.UID), Gid: uint32(a.cfg.GID), Groups: []uint32{}},
			Pdeathsig:  syscall.SIGKILL,
		},
	}
	c := &child{id: id, proc: &python{exited: make(chan struct{})}, stdin: files[0][1]}
	pid, err := a.reaper.start(func() (int, error) { return syscall.ForkExec(path, req.Argv, attr) }, c.proc)
	// The agent keeps no copy of the child's ends: the host pipes' only holder in the sandbox is
	// the child, whose exit the daemon then sees.
	files[0][0].Close()
	files[1][1].Close()
	files[2][1].Close()
	if err != nil {
		if !hostStdio {
			files[0][1].Close()
			files[1][0].Close()
		}
		files[2][0].Close()
		return a.fail(id, sandbox.KindInvalidRequest, fmt.Sprintf("spawn %s: %v", req.Argv[0], err))
	}
	c.proc.pid = pid
	a.mu.Lock()
	a.children[id] = c
	a.mu.Unlock()
	done := make(chan struct{}, 2)
	if hostStdio {
		done <- struct{}{} // stdout goes to the host, not through the agent
	}
	pipe := func(f *os.File, stream string, limit int64) {
		defer func() { done <- struct{}{} }()
		defer f.Close()
		buf := make([]byte, 64<<10)
		var sent int64
		for {
			n, err := f.Read(buf)
			if n > 0 && (limit <= 0 || sent < limit) {
				chunk := buf[:n]
				if limit > 0 && sent+int64(n) > limit {
					chunk = chunk[:limit-sent]
				}
				sent += int64(len(chunk))
				_ = a.send(&proto.Frame{Op: proto.OpOutput, ID: id, Stream: stream, Data: append([]byte(nil), chunk...)})
			}
			if err != nil {
				return
			}
		}
	}
	if !hostStdio {
		go pipe(files[1][0], proto.Stdout, 0)
	}
	go pipe(files[2][0], proto.Stderr, req.StderrBytes)
	go func() {
		<-c.proc.exited
		<-done
		<-done
		a.mu.Lock()
		delete(a.children, id)
		a.mu.Unlock()
		if c.stdin != nil {
			c.stdin.Close()
		}
		code := exitCode(c.proc.status)
		_ = a.send(&proto.Frame{Op: proto.OpExit, ID: id, ExitCode: code, Status: describeStatus(c.proc.status)})
	}()
	return nil
}

// childStdin feeds a child's stdin (or closes it). Frames for a child that has ended are dropped.
func (a *agent) childStdin(id uint64, data []byte, closeIt bool) {
	a.mu.Lock()
	c := a.children[id]
	a.mu.Unlock()
	if c == nil || c.stdin == nil { // ended, or fed on the host pipe
		return
	}
	if len(data) > 0 {
		// A write blocks while the child does not read; the daemon's frames wait behind it,
		// which is the back-pressure a stdio server gets anyway.
		if _, err := c.stdin.Write(data); err != nil {
			return
		}
	}
	if closeIt {
		c.stdin.Close()
	}
}

// killChild ends a child and its process group.
func (a *agent) killChild(id uint64) {
	a.mu.Lock()
	c := a.children[id]
	a.mu.Unlock()
	if c != nil {
		_ = syscall.Kill(-c.proc.pid, syscall.SIGKILL)
	}
}

// takeHostStdio hands out the host pipes (Config.HostStdin and HostStdout) once: the first
// child that asks gets them, later ones nil.
func (a *agent) takeHostStdio() (in, out *os.File) {
	a.mu.Lock()
	defer a.mu.Unlock()
	in, out = a.cfg.HostStdin, a.cfg.HostStdout
	a.cfg.HostStdin, a.cfg.HostStdout = nil, nil
	return in, out
}

// hostStdio returns the host pipes the daemon passed into the sandbox at proto.HostStdinFD and
// proto.HostStdoutFD (runsc --pass-fd), or nils when the sandbox has none (a sandbox of the
// pool: those descriptors are then not open, or not pipes). They are made close-on-exec so that
// the Python process does not inherit them; spawn gives them to its child explicitly.
func hostStdio() (in, out *os.File) {
	isPipe := func(fd int) bool {
		var st unix.Stat_t
		return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO
	}
	if !isPipe(proto.HostStdinFD) || !isPipe(proto.HostStdoutFD) {
		return nil, nil
	}
	unix.CloseOnExec(proto.HostStdinFD)
	unix.CloseOnExec(proto.HostStdoutFD)
	return os.NewFile(proto.HostStdinFD, "host-stdin"), os.NewFile(proto.HostStdoutFD, "host-stdout")
}
