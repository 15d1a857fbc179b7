package bench

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/internal/guest"
)

// The heavy baselines: the image's own python3, run natively.

// chrootPython runs the image's own python3 natively: chrooted into the image's root file system
// (as `chroot ROOTFS python3 -c CODE` would, but as uid 1000 like the code in a sandbox, so it
// cannot write into the image), with the environment the guest gives its Python.
type chrootPython struct {
	rootfs string
}

// chrootEnv is the guest's Python environment (guest.defaultEnv), the same in both.
var chrootEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/tmp", "LANG=C.UTF-8", "TMPDIR=/tmp", "MPLBACKEND=Agg",
	"MPLCONFIGDIR=/var/cache/agentbox/matplotlib", "PYTHONDONTWRITEBYTECODE=1",
}

func (p chrootPython) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "/usr/bin/python3", args...)
	cmd.Env = chrootEnv
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: p.rootfs, Credential: &syscall.Credential{Uid: 1000, Gid: 1000, Groups: []uint32{}}}
	return cmd
}

// run runs code in a fresh process and returns its stdout and the time from start to exit.
func (p chrootPython) run(ctx context.Context, code string) (string, time.Duration, error) {
	return timedRun(p.command(ctx, "-c", code), "chroot python3")
}

// describe is the equivalent shell command, for the notes.
func (p chrootPython) describe() string {
	return "chroot --userspec=1000:1000 " + p.rootfs + " /usr/bin/python3 -c CODE (environment: " + strings.Join(chrootEnv, " ") + ")"
}

// startREPL starts a replLoop in the chroot: the baseline of cells in a warm session.
func (p chrootPython) startREPL(ctx context.Context) (*nativeREPL, error) {
	return startREPL(p.command(ctx, "-u", "-c", replLoop))
}

// startTunedREPL is startREPL with glibc's malloc set as the guest sets it for its Python
// (guest.MallocTunables): the compute table's like-for-like baseline, where what differs from
// the session is the sandbox alone.
func (p chrootPython) startTunedREPL(ctx context.Context) (*nativeREPL, error) {
	cmd := p.command(ctx, "-u", "-c", replLoop)
	cmd.Env = append(cmd.Env[:len(cmd.Env):len(cmd.Env)], guest.MallocTunables)
	return startREPL(cmd)
}
