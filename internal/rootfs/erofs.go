package rootfs

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// An image also keeps its root file system as one EROFS image (NAME/HASH/rootfs.erofs). gVisor (the
// heavy tier) reads an EROFS root itself, in the sandbox's own process, so a sandbox then needs no
// gofer process to serve its root from the directory: one process and ~6 MiB fewer per sandbox, and
// restores ~5-10% faster (internal/runtimes/heavy/FIGURES.md). The directory stays: the module
// probe, native baselines and the next guest refresh read it. Made with mkfs.erofs (Debian's
// erofs-utils, installed with apt when missing); when it cannot be made the image is served from
// its directory as before.

const erofsFile = "rootfs.erofs"

// Erofs returns the image's EROFS file if it holds the image's current guest agent, else "".
func (i Image) Erofs() string {
	if i.Manifest.ErofsGuestSHA256 == "" || i.Manifest.ErofsGuestSHA256 != i.Manifest.GuestSHA256 {
		return ""
	}
	p := filepath.Join(i.Dir, erofsFile)
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// MakeErofs writes rootfs as an EROFS image to file. -E noinline_data keeps every file's data in
// whole blocks: gVisor maps file data from the image, and with inline tails python3 fails to load
// (notes/gvisor.md). It is BuildOptions.Erofs's default.
func MakeErofs(ctx context.Context, rootfs, file string, log io.Writer) error {
	if err := EnsureDebianPackage(ctx, "mkfs.erofs", "erofs-utils", log); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "mkfs.erofs", "-E", "noinline_data", "--quiet", file, rootfs)
	cmd.Stdout, cmd.Stderr = log, log
	return cmd.Run()
}

// makeErofs (re)makes dir/rootfs.erofs from dir/rootfs and records in m which guest agent it
// holds. A failure is reported on opts.Out and leaves the image without one: it is then served
// from its directory. The file is replaced atomically, so sandboxes running from the old one
// keep it.
func makeErofs(ctx context.Context, dir string, m *Manifest, opts BuildOptions) {
	m.ErofsGuestSHA256 = ""
	mk := opts.Erofs
	if mk == nil {
		mk = MakeErofs
	}
	start := time.Now()
	tmp := filepath.Join(dir, erofsFile+".tmp")
	var log strings.Builder
	err := mk(ctx, filepath.Join(dir, "rootfs"), tmp, &log)
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, erofsFile))
	}
	if err != nil {
		_ = os.Remove(tmp)
		fmt.Fprintf(opts.Out, "image %s: no EROFS copy of the root file system (sandboxes read the directory through a gofer): %v %s\n",
			m.Name, err, strings.TrimSpace(log.String()))
		return
	}
	m.ErofsGuestSHA256 = m.GuestSHA256
	fmt.Fprintf(opts.Out, "image %s: EROFS copy of the root file system made in %v\n", m.Name, time.Since(start).Round(100*time.Millisecond))
}
