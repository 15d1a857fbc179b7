// Command agentbox-runsc-wait stands in for an attached `runsc restore` while a restored sandbox
// lives: it runs `runsc ... restore --detach --pid-file F ...`, becomes the sandbox's parent
// (a child subreaper: the sandbox process runsc started is reparented to it when runsc exits),
// reaps every process of its subtree, and exits with the sandbox process's status (the
// container's, as `runsc boot` exits with it) once all are gone. An attached `runsc restore`
// does the same job but holds ~4.8 MiB of PSS per sandbox (runsc's package initialisation);
// this holds well under 1 MiB of its own. Built by `agentbox setup` beside runsc; the heavy
// tier uses it when present (docs/RATIONALE.md, "Memory per idle heavy session").
//
// Usage: agentbox-runsc-wait FDS PIDFILE RUNSC ARGS...
//
// FDS is how many descriptors beyond stdio (3, 4, ...) are passed on to runsc, PIDFILE the file
// runsc writes the sandbox's pid to (it must be among ARGS as --pid-file). Stdin and stdout and
// the passed descriptors are closed once runsc has returned, so that the daemon reading the
// container's stdout sees its end when the sandbox ends; stderr stays for messages.
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

const prSetChildSubreaper = 36

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: agentbox-runsc-wait FDS PIDFILE RUNSC ARGS...")
		return 2
	}
	fds, err := strconv.Atoi(args[0])
	if err != nil || fds < 0 {
		fmt.Fprintf(os.Stderr, "agentbox-runsc-wait: bad FDS %q\n", args[0])
		return 2
	}
	pidFile, argv := args[1], args[2:]
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		fmt.Fprintf(os.Stderr, "agentbox-runsc-wait: prctl(PR_SET_CHILD_SUBREAPER): %v\n", e)
		return 126
	}
	files := []uintptr{0, 1, 2}
	for i := 0; i < fds; i++ {
		files = append(files, uintptr(3+i))
	}
	pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{Env: os.Environ(), Files: files})
	if err != nil {
		fmt.Fprintf(os.Stderr, "agentbox-runsc-wait: start %s: %v\n", argv[0], err)
		return 126
	}
	ws, err := wait(pid)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agentbox-runsc-wait: wait for runsc: %v\n", err)
		return 126
	}
	for i := 0; i < fds; i++ {
		syscall.Close(3 + i)
	}
	syscall.Close(0)
	syscall.Close(1)
	if status(ws) != 0 {
		// The restore failed: runsc destroyed what it had started; reap whatever is left.
		reapAll(-1)
		return status(ws)
	}
	sandbox := -1
	if b, err := os.ReadFile(pidFile); err == nil {
		sandbox, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	return reapAll(sandbox)
}

// reapAll waits for every child (the sandbox and anything else runsc left to this subreaper)
// until none is left, and returns the status of sandbox (0 if it was never seen).
func reapAll(sandbox int) int {
	code := 0
	for {
		var ws syscall.WaitStatus
		p, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil { // ECHILD: all gone
			return code
		}
		if p == sandbox {
			code = status(ws)
		}
	}
}

func wait(pid int) (syscall.WaitStatus, error) {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		return ws, err
	}
}

// status is a wait status as a shell gives it: the exit code, or 128 + the signal.
func status(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
