package jail_test

// The probes run inside real jails: TestMain re-executes this test binary
// through jail.Command with os.Args = [jail.WorkerArgv0, probeArg, name, args...].
// Each prints "key: value" lines the tests check, and exits 0.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/agentbox-dev/agentbox/internal/dirtypages"
	"github.com/agentbox-dev/agentbox/internal/jail"
	"golang.org/x/sys/unix"
)

const probeArg = "__jail-probe"

var probes = map[string]func(args []string){
	"ready":      probeReady,
	"idle":       probeIdle,
	"net":        probeNet,
	"files":      probeFiles,
	"ids":        probeIDs,
	"fds":        probeFDs,
	"rlimit-as":  probeRlimitAS,
	"lockdown":   probeLockDown,
	"workload":   probeWorkload,
	"env":        probeEnv,
	"open-after": probeOpenAfter,
	"spin":       probeSpin,
	"hang":       probeHang,
	"procself":   probeProcSelf,
}

// runProbe runs the named probe and exits.
func runProbe(args []string) {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "probe: no name")
		os.Exit(2)
	}
	p, ok := probes[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "probe: unknown %q\n", args[0])
		os.Exit(2)
	}
	p(args[1:])
	os.Exit(0)
}

func say(key string, format string, a ...any) {
	fmt.Printf("%s: %s\n", key, fmt.Sprintf(format, a...))
}

func errText(err error) string {
	if err == nil {
		return "nil"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

func probeReady([]string) { say("ready", "pid %d", os.Getpid()) }

// probeIdle says ready and then waits for stdin to close.
func probeIdle([]string) {
	say("ready", "yes")
	io.Copy(io.Discard, os.Stdin)
}

// probeNet lists interfaces and dials the address in args[0].
func probeNet(args []string) {
	ifs, err := net.Interfaces()
	if err != nil {
		say("interfaces", "error %v", err)
	} else {
		var names []string
		for _, i := range ifs {
			names = append(names, i.Name)
		}
		say("interfaces", "%s", strings.Join(names, ","))
	}
	c, err := net.DialTimeout("tcp", args[0], time.Second)
	if err == nil {
		c.Close()
	}
	say("dial", "%s", errText(err))
	_, err = net.DialTimeout("tcp", "1.1.1.1:53", time.Second)
	say("dial-internet", "%s", errText(err))
}

// probeFiles looks for host files; args: secret path, artifact file, artifact dir.
func probeFiles(args []string) {
	secret, artifact, dir := args[0], args[1], args[2]
	_, err := os.ReadFile("/etc/passwd")
	say("passwd", "%s", errText(err))
	_, err = os.ReadFile(secret)
	say("secret", "%s", errText(err))
	_, err = os.Stat(secret[:strings.LastIndexByte(secret, '/')])
	say("secret-dir", "%s", errText(err))
	_, err = os.Stat("/proc/self/status")
	say("proc", "%s", errText(err))

	entries, err := os.ReadDir("/")
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	say("root", "%s %s", strings.Join(names, ","), errText(err))
	say("root-write", "%s", errText(os.WriteFile("/x", nil, 0o644)))
	say("root-mkdir", "%s", errText(os.Mkdir("/tmp", 0o755)))

	b, err := os.ReadFile(artifact)
	say("artifact", "%q %s", b, errText(err))
	_, err = os.OpenFile(artifact, os.O_WRONLY, 0)
	say("artifact-write", "%s", errText(err))
	say("artifact-chmod", "%s", errText(os.Chmod(artifact, 0o777)))
	b, err = os.ReadFile(dir + "/entry")
	say("dir-read", "%q %s", b, errText(err))
	say("dir-create", "%s", errText(os.WriteFile(dir+"/new", nil, 0o644)))
	say("dir-remove", "%s", errText(os.Remove(dir+"/entry")))
}

// probeIDs reports credentials, capabilities and the namespace view.
func probeIDs([]string) {
	ruid, euid, suid := unix.Getresuid()
	rgid, egid, sgid := unix.Getresgid()
	groups, _ := unix.Getgroups()
	say("uid", "%d %d %d", ruid, euid, suid)
	say("gid", "%d %d %d", rgid, egid, sgid)
	say("groups", "%v", groups)
	say("pid", "%d", os.Getpid())
	host, _ := os.Hostname() // reads /proc/sys/kernel/hostname, falls back to uname
	say("hostname", "%s", host)

	hdr := unix.CapUserHeader{Version: 0x20080522}
	var data [2]unix.CapUserData
	err := unix.Capget(&hdr, &data[0])
	say("caps", "eff=%x%x prm=%x%x inh=%x%x %s",
		data[1].Effective, data[0].Effective, data[1].Permitted, data[0].Permitted,
		data[1].Inheritable, data[0].Inheritable, errText(err))
	var bounding []int
	for c := 0; c < 64; c++ {
		r, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0)
		if err != nil {
			break
		}
		if r == 1 {
			bounding = append(bounding, c)
		}
	}
	say("bounding", "%v", bounding)
	nnp, _ := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	say("nnp", "%d", nnp)
	// The parent-death signal is per thread (only the thread that exec'd
	// carries it), so TestParentDeath checks it by behaviour instead.
	runtime.LockOSThread()
	_, _, e := unix.RawSyscall(unix.SYS_SETRESUID, 0, 0, 0)
	say("setuid0", "%s", errText(e))
	say("mount", "%s", errText(unix.Mount("tmpfs", "/", "tmpfs", 0, "")))
	say("chroot", "%s", errText(unix.Chroot("/")))
	var rl unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NPROC, &rl)
	say("nproc", "%d", rl.Cur)
	unix.Getrlimit(unix.RLIMIT_CORE, &rl)
	say("core", "%d", rl.Cur)
}

// probeFDs lists open fds, tries to escape through any directory fd it
// holds, and with args[0] "echo" echoes a line from fd 3 to fd 4.
func probeFDs(args []string) {
	var open []string
	escaped := "no"
	for fd := 0; fd < 1024; fd++ {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil {
			continue
		}
		open = append(open, fmt.Sprint(fd))
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if f, err := unix.Openat(fd, "../../../../../../etc/passwd", unix.O_RDONLY, 0); err == nil {
				unix.Close(f)
				escaped = "yes"
			}
		}
	}
	say("open", "%s", strings.Join(open, ","))
	say("escaped", "%s", escaped)
	if len(args) == 0 || args[0] != "echo" {
		return
	}
	in := os.NewFile(3, "in")
	out := os.NewFile(4, "out")
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil {
		say("fd3", "%s", errText(err))
		return
	}
	fmt.Fprintf(out, "echo %s", line)
	out.Close()
}

// probeRlimitAS maps far more address space than RLIMIT_AS allows, and a
// little that fits.
func probeRlimitAS([]string) {
	var rl unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_AS, &rl)
	say("as", "%d", rl.Cur)
	_, err := unix.Mmap(-1, 0, 8<<30, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	say("mmap-huge", "%s", errText(err))
	b, err := unix.Mmap(-1, 0, 16<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	say("mmap-small", "%s", errText(err))
	if err == nil {
		unix.Munmap(b)
	}
}

// probeLockDown locks down with DefaultAllowlist, shows that ordinary work
// goes on, then makes the syscall named by args[0].
func probeLockDown(args []string) {
	if err := jail.LockDown(jail.DefaultAllowlist); err != nil {
		say("lockdown", "%v", err)
		return
	}
	say("lockdown", "ok")
	everydayWork(200 * time.Millisecond)
	// Answered with an error, not a kill.
	_, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_DUMPABLE, 0, 0, 0, 0, 0)
	say("prctl", "%s", errText(e))
	_, _, e = unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)
	say("clone3", "%s", errText(e))
	_, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE|unix.MAP_ANON)
	say("mmap-exec", "%s", errText(err))
	b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err == nil {
		say("mprotect-exec", "%s", errText(unix.Mprotect(b, unix.PROT_READ|unix.PROT_EXEC)))
		say("mprotect-ro", "%s", errText(unix.Mprotect(b, unix.PROT_READ)))
	}
	say("alive", "yes")
	switch args[0] {
	case "none":
	case "socket":
		unix.RawSyscall(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, 0)
	case "ptrace":
		unix.RawSyscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0)
	case "execve":
		argv0, _ := unix.BytePtrFromString("/artifacts/x")
		argv := []*byte{argv0, nil}
		unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(argv0)), uintptr(unsafe.Pointer(&argv[0])), 0)
	case "fork":
		r, _, _ := unix.RawSyscall6(unix.SYS_CLONE, uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
		if r == 0 {
			unix.RawSyscall(unix.SYS_EXIT_GROUP, 3, 0, 0)
		}
	case "mount":
		unix.Mount("tmpfs", "/", "tmpfs", 0, "")
	case "unshare":
		unix.RawSyscall(unix.SYS_UNSHARE, unix.CLONE_NEWUSER, 0, 0)
	case "setuid":
		unix.RawSyscall(unix.SYS_SETUID, 0, 0, 0)
	case "kill":
		unix.RawSyscall(unix.SYS_KILL, 1, 0, 0)
	}
	say("survived", "%s", args[0])
}

// everydayWork is what a worker does between guests: allocate, collect,
// spread work over goroutines, wait on timers and channels, write output.
func everydayWork(d time.Duration) {
	var wg sync.WaitGroup
	results := make(chan int, 64)
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			b := make([]byte, 1<<20)
			for j := range b {
				b[j] = byte(i + j)
			}
			time.Sleep(time.Millisecond * time.Duration(i%5))
			results <- int(b[len(b)-1])
		}(i)
	}
	wg.Wait()
	close(results)
	big := make([]byte, 256<<20) // fresh heap from the kernel
	for i := 0; i < len(big); i += 4096 {
		big[i] = 1
	}
	big = nil
	runtime.GC()
	timer := time.NewTimer(d / 2)
	ticker := time.NewTicker(d / 10)
	deadline := time.After(d)
	ticks := 0
loop:
	for {
		select {
		case <-timer.C:
		case <-ticker.C:
			ticks++
		case <-deadline:
			break loop
		}
	}
	ticker.Stop()
	say("work", "ticks>0=%v", ticks > 0)
}

// probeWorkload runs a heavier mix for the allowlist: preemption of spinning
// goroutines (tgkill/SIGURG), thread creation by blocking reads, ~1.5 s so
// the runtime's once-a-second checks happen, files opened after LockDown.
func probeWorkload(args []string) {
	if err := jail.LockDown(jail.DefaultAllowlist); err != nil {
		say("lockdown", "%v", err)
		return
	}
	say("lockdown", "ok")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() { // tight loops only async preemption can interrupt
			defer wg.Done()
			x := 0
			for {
				for j := 0; j < 1e7; j++ {
					x += j
				}
				select {
				case <-stop:
					_ = x
					return
				default:
				}
			}
		}()
	}
	// Blocking reads on a pipe park threads in syscalls: the runtime starts
	// new threads to keep running goroutines.
	in := os.NewFile(3, "in")
	wg.Add(1)
	go func() {
		defer wg.Done()
		b, _ := io.ReadAll(in)
		say("read-fd3", "%d bytes", len(b))
	}()
	everydayWork(1500 * time.Millisecond)
	if len(args) > 0 {
		b, err := os.ReadFile(args[0])
		say("read-bind", "%d %s", len(b), errText(err))
	}
	close(stop)
	wg.Wait()
	say("threads", "%d", runtime.NumGoroutine())
	say("done", "yes")
}

func probeEnv([]string) {
	say("env", "%s", strings.Join(os.Environ(), " "))
	say("args", "%s", strings.Join(os.Args, " "))
	say("gomaxprocs", "%d", runtime.GOMAXPROCS(0))
	wd, _ := os.Getwd()
	say("cwd", "%s", wd)
}

// probeOpenAfter opens a bind after LockDown: os.Open uses openat, fstat,
// fcntl and the poller.
func probeOpenAfter(args []string) {
	if err := jail.LockDown(jail.DefaultAllowlist); err != nil {
		say("lockdown", "%v", err)
		return
	}
	f, err := os.Open(args[0])
	if err != nil {
		say("open", "%s", errText(err))
		return
	}
	b, err := io.ReadAll(f)
	f.Close()
	st, serr := os.Stat(args[0])
	say("open", "%d %s %v", len(b), errText(err), serr == nil && st.Size() == int64(len(b)))
}

// probeSpin burns CPU until something stops it.
func probeSpin([]string) {
	say("ready", "yes")
	x := 0
	for {
		x++
	}
}

// probeHang says ready and sleeps, deaf to stdin.
func probeHang([]string) {
	say("ready", "yes")
	time.Sleep(time.Hour)
}

// probeProcSelf lists what Spec.ProcSelf's proc mount shows, takes /proc/self/pagemap from it
// with TakeProcSelf, and tracks written pages with it.
func probeProcSelf([]string) {
	v, ok := os.LookupEnv("_AGENTBOX_JAIL_PROC")
	if !ok {
		say("procfd", "none")
		return
	}
	var fd int
	fmt.Sscan(v, &fd)
	dup, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		say("entries", "%s", errText(err))
		return
	}
	d := os.NewFile(uintptr(dup), "proc")
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		say("entries", "%s", errText(err))
		return
	}
	slices.Sort(names)
	say("entries", "%s", strings.Join(names, ","))
	files, err := jail.TakeProcSelf("pagemap")
	if err != nil || len(files) != 1 {
		say("pagemap", "%v", err)
		return
	}
	say("pagemap", "ok")
	dirs := "none"
	for fd := 0; fd < 1024; fd++ {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			dirs = fmt.Sprint(fd)
		}
	}
	say("dirs", "%s", dirs)
	again, _ := jail.TakeProcSelf("pagemap")
	say("again", "%d", len(again))
	tr, err := dirtypages.Open(files[0])
	if err != nil {
		say("tracking", "%v", err)
		return
	}
	if err := jail.LockDownIoctl(append(slices.Clone(jail.DefaultAllowlist), "mprotect"), dirtypages.Requests()); err != nil {
		say("tracking", "lockdown: %v", err)
		return
	}
	b, err := unix.Mmap(-1, 0, 64<<10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		say("tracking", "%v", err)
		return
	}
	if err := tr.Register(b); err != nil {
		say("tracking", "%v", err)
		return
	}
	b[2*dirtypages.Page] = 1
	var got []int
	if err := tr.Written(b, func(off, n int) { got = append(got, off/dirtypages.Page, n/dirtypages.Page) }); err != nil {
		say("tracking", "%v", err)
		return
	}
	say("tracking", "%v", got)
}
