package jail

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// MaybeInit must be called first thing in main (and in TestMain of tests that
// start jails). In a process started by Command it is the jail's init stage:
// it builds the jail and execs the worker, and never returns (on failure it
// exits with InitFailedExitCode). In any other process it returns at once.
//
// The init stage runs as root, as PID 1 of the new PID namespace, and in
// order: checks the inherited fds, opens its own executable, finds its
// loader and libraries (if dynamically linked), makes every mount private,
// captures the bind sources, mounts an empty tmpfs root with the binds,
// pivots into it and detaches the host tree, makes the root
// read-only, sets the hostname, and then on one locked thread marks every
// other fd close-on-exec, sets the rlimits, drops the capability bounding set,
// groups, gid and uid, sets no_new_privs and the parent-death signal, and
// execs the binary in place (execveat on the fd opened first).
func MaybeInit() {
	if len(os.Args) != 2 || os.Args[1] != initArg {
		return
	}
	err := runInit()
	fmt.Fprintf(os.Stderr, "agentbox jail: %v\n", err)
	os.Exit(InitFailedExitCode)
}

// runInit returns only on failure.
func runInit() error {
	raw, ok := os.LookupEnv(specEnv)
	if !ok {
		return errors.New("init stage started without a spec")
	}
	var p initPayload
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return fmt.Errorf("decode spec: %w", err)
	}
	spec := &p.Spec
	if err := spec.validate(); err != nil {
		return err
	}
	// Refuse to touch mounts unless this really is a fresh PID namespace (and
	// so, as Command sets them together, a fresh mount namespace).
	if os.Getpid() != 1 {
		return errors.New("init stage is not PID 1 of a new PID namespace; start it with jail.Command")
	}
	if err := checkFDs(3 + p.ExtraFiles); err != nil {
		return err
	}
	// While the host's /proc is still there (buildRoot pivots away from it).
	if err := setAutogroupNice(spec.Nice); err != nil {
		return err
	}
	// The daemon's umask (077, say) must not make the root's directories
	// untraversable for the worker.
	unix.Umask(0o022)
	// The binary is executed from this fd after the pivot, so it need not be
	// (and is not) visible inside the jail. It closes at that execve.
	exe, err := unix.Open("/proc/self/exe", unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open own executable: %w", err)
	}
	deps, err := findLoaderDeps()
	if err != nil {
		return err
	}
	if err := buildRoot(spec, deps); err != nil {
		return err
	}
	hostname := spec.Hostname
	if hostname == "" {
		hostname = DefaultHostname
	}
	if err := unix.Sethostname([]byte(hostname)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	env := []string{"HOME=/"}
	if deps.libPath != "" {
		env = append(env, "LD_LIBRARY_PATH="+deps.libPath)
	}
	keep := -1
	if spec.ProcSelf {
		if keep, err = procMount(); err != nil {
			return err
		}
		env = append(env, procSelfEnv+"="+strconv.Itoa(keep))
	}
	return execWorker(exe, p.Args, append(env, spec.Env...), spec.Rlimits, spec.Nice, spec.UID, spec.GID, p.ExtraFiles, keep)
}

// setAutogroupNice gives the jail's scheduling autogroup the worker's niceness. Command starts
// every jail in a session of its own (Setsid), and with autogroup scheduling on
// (CONFIG_SCHED_AUTOGROUP with /proc/sys/kernel/sched_autogroup_enabled, the default of many
// distributions' kernels) a new session is a task group of its own, weighted as a nice-0
// process against every other group: a thread's niceness then only ranks it among the threads
// of its own session, so a jail at nice 5 took as much CPU as the daemon's whole session, and
// eight spinning guests left the daemon a ninth of a busy machine, not the share Spec.Nice
// promises. Giving the group the same niceness restores that weight. A kernel without
// autogroups has no such file (nothing to do); where a cpu cgroup other than the root holds the
// process, the kernel ignores the autogroup and the niceness of the threads counts, as meant.
// Root in the init user namespace (which the jail's mounts need anyway) is not subject to the
// kernel's limit of one autogroup change per 100 ms.
func setAutogroupNice(nice int) error {
	if nice == 0 {
		return nil
	}
	f, err := os.OpenFile("/proc/self/autogroup", os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err == nil {
		_, err = f.WriteString(strconv.Itoa(nice))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("autogroup nice %d: %w", nice, err)
	}
	return nil
}

// procSelfEnv names the fd of Spec.ProcSelf's proc mount in the worker's environment.
const procSelfEnv = "_AGENTBOX_JAIL_PROC"

// procMount makes Spec.ProcSelf's proc file system, detached: an fd of its root.
func procMount() (int, error) {
	fs, err := unix.Fsopen("proc", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("proc for the worker: fsopen: %w", err)
	}
	defer unix.Close(fs)
	for _, kv := range [][2]string{{"subset", "pid"}, {"hidepid", "invisible"}} {
		if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
			return -1, fmt.Errorf("proc for the worker: %s=%s: %w", kv[0], kv[1], err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, fmt.Errorf("proc for the worker: create: %w", err)
	}
	fd, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return -1, fmt.Errorf("proc for the worker: fsmount: %w", err)
	}
	return fd, nil
}

// TakeProcSelf opens the calling worker's own /proc/self/NAME files (read-only) from the proc
// mount Spec.ProcSelf gave it, then closes that mount for good. Outside a jail with ProcSelf it
// returns nil files and no error: the caller opens /proc itself if it has one.
func TakeProcSelf(names ...string) ([]*os.File, error) {
	v, ok := os.LookupEnv(procSelfEnv)
	if !ok {
		return nil, nil
	}
	os.Unsetenv(procSelfEnv)
	fd, err := strconv.Atoi(v)
	if err != nil {
		return nil, fmt.Errorf("jail: bad %s=%q", procSelfEnv, v)
	}
	defer unix.Close(fd)
	var out []*os.File
	for _, n := range names {
		f, err := unix.Openat(fd, "self/"+n, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			for _, o := range out {
				o.Close()
			}
			return nil, fmt.Errorf("jail: open /proc/self/%s: %w", n, err)
		}
		out = append(out, os.NewFile(uintptr(f), "/proc/self/"+n))
	}
	return out, nil
}

// checkFDs makes sure fds 0..n-1 are open, none is a directory, and none is
// close-on-exec, so exactly they reach the worker.
func checkFDs(n int) error {
	for fd := 0; fd < n; fd++ {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("fd %d (was Cmd.ExtraFiles changed after Command?): %w", fd, err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return fmt.Errorf("fd %d is a directory: an open directory escapes the jail's root", fd)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
			return fmt.Errorf("clear close-on-exec of fd %d: %w", fd, err)
		}
	}
	return nil
}
