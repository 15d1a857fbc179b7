package jail

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// initArg is argv[1] of the init stage; the rest travels in specEnv.
const (
	initArg = "__agentbox-jail-init"
	specEnv = "_AGENTBOX_JAIL_SPEC"
)

// cloneFlags are the namespaces every jail gets: its own mount table (an
// empty tmpfs root), network stack (only an unconfigured lo), PID space (the
// worker is PID 1 and sees no other process), System V IPC, hostname and
// cgroup view.
const cloneFlags = syscall.CLONE_NEWNS | syscall.CLONE_NEWNET | syscall.CLONE_NEWPID |
	syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP

// initPayload is what Command hands the init stage.
type initPayload struct {
	Spec       Spec
	Args       []string
	ExtraFiles int // len(Spec.ExtraFiles), which does not travel
}

// Command returns an *exec.Cmd that runs the current binary (/proc/self/exe)
// inside a new jail as the worker with os.Args = [WorkerArgv0, args...].
//
// The caller sets Stdin, Stdout and Stderr (pipes, or nil for /dev/null) and
// calls Start. It must not change Path, Args, Env, ExtraFiles or SysProcAttr.
// Fds 0-2 and spec.ExtraFiles (as 3, 4, ...) are all the worker holds.
//
// The process started is first the jail's init stage (root, in the new
// namespaces), which calls MaybeInit, builds the jail and then execs the
// worker in place as an unprivileged uid: the pid the caller sees is the
// worker's, and it is PID 1 of its namespace.
// If the init stage fails, the process exits with InitFailedExitCode and
// writes the reason to its stderr.
//
// Cmd.SysProcAttr.Pdeathsig is SIGKILL; Linux ties it to the thread that
// forked (Go issue 27505), so do not call Start from a goroutine locked to an
// OS thread that may exit before the worker should. Command needs root (it
// creates namespaces and mounts).
func Command(spec Spec, args ...string) (*exec.Cmd, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	for i, f := range spec.ExtraFiles {
		fi, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("%w: extra file %d: %w", ErrInvalidSpec, i, err)
		}
		if fi.IsDir() {
			return nil, fmt.Errorf("%w: extra file %d is a directory: an open directory escapes the jail's root", ErrInvalidSpec, i)
		}
	}
	payload, err := json.Marshal(initPayload{Spec: spec, Args: args, ExtraFiles: len(spec.ExtraFiles)})
	if err != nil {
		return nil, fmt.Errorf("jail: encode spec: %w", err)
	}
	cmd := &exec.Cmd{
		Path: "/proc/self/exe",
		Args: []string{"agentbox-jail", initArg},
		Env:  []string{specEnv + "=" + string(payload)},
		// Copied: the caller's slice stays theirs.
		ExtraFiles: append([]*os.File(nil), spec.ExtraFiles...),
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: cloneFlags,
			Pdeathsig:  syscall.SIGKILL,
			// A session of its own: no controlling terminal to inject into,
			// and no share in the daemon's terminal signals.
			Setsid: true,
		},
	}
	return cmd, nil
}
