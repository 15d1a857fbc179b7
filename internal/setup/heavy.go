package setup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/images"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/rootfs"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
)

// Heavy prepares the heavy tier in cfg's data directory (see heavy.Layout): runsc built from
// source at the version go.mod pins (heavy.RunscVersion), the static guest agent, and the default
// image. Each part is cached (runsc by version, the image by its recipe's hash) and installed
// atomically; a second run only checks. Needs root and a Go toolchain (runsc and the agent are
// built from source); debootstrap is installed with apt when missing.
func Heavy(ctx context.Context, cfg config.Config, opts Options, out io.Writer) error {
	if os.Geteuid() != 0 {
		return errors.New("setup heavy: needs root (runsc, debootstrap, cgroups)")
	}
	l := heavy.LayoutFor(cfg.DataDir)
	if err := os.MkdirAll(l.BinDir(), 0o755); err != nil {
		return fmt.Errorf("setup heavy: %w", err)
	}
	root, rootErr := heavy.SourceRoot(".")
	if err := buildRunsc(ctx, l, root, opts.Force, out); err != nil {
		return fmt.Errorf("setup heavy: runsc: %w", err)
	}
	if rootErr == nil {
		// The waiter of restored sandboxes (cmd/agentbox-runsc-wait): small, rebuilt every time.
		if err := heavy.BuildRunscWait(ctx, root, l.RunscWait()); err != nil {
			return fmt.Errorf("setup heavy: runsc waiter: %w", err)
		}
		fmt.Fprintf(out, "heavy: runsc waiter built: %s\n", l.RunscWait())
	}
	guest := l.Guest()
	if rootErr == nil {
		t := time.Now()
		if err := heavy.BuildGuest(ctx, root, guest); err != nil {
			return fmt.Errorf("setup heavy: guest agent: %w", err)
		}
		fmt.Fprintf(out, "heavy: guest agent built from %s in %v\n", root, time.Since(t).Round(100*time.Millisecond))
	} else {
		var err error
		if guest, err = l.FindGuest(""); err != nil {
			return fmt.Errorf("setup heavy: %w", err)
		}
		fmt.Fprintf(out, "heavy: guest agent %s\n", guest)
	}
	r, err := rootfs.LoadRecipe(images.Default)
	if err != nil {
		return fmt.Errorf("setup heavy: %w", err)
	}
	if _, _, err := l.Images().Build(ctx, r, rootfs.BuildOptions{Guest: guest, Force: opts.Force, Out: out}); err != nil {
		return fmt.Errorf("setup heavy: %w", err)
	}
	return nil
}

// buildRunsc builds runsc at heavy.RunscVersion into the layout unless it is there and runs. In
// the source tree it builds our main of runsc (heavy.RunscMain) against the gVisor version go.mod
// requires (the `tool` directive pins it), so the binary runs what `go tool runsc` would run plus
// our sentry's memory release; elsewhere it installs upstream runsc at that version from the
// module proxy. The version string stays heavy.RunscVersion either way (gVisor restores only
// checkpoints taken by the same version string); a cached binary of ours is current when its
// `--version` also says heavy.RunscBuild. Always static: a dynamically linked runsc cannot
// re-execute itself after pivoting into the sandbox's root (notes/gvisor.md).
func buildRunsc(ctx context.Context, l heavy.Layout, sourceRoot string, force bool, out io.Writer) error {
	dst := l.Runsc(heavy.RunscVersion)
	current := func(v string) bool {
		return strings.Contains(v, heavy.RunscVersion) && (sourceRoot == "" || strings.Contains(v, heavy.RunscBuild))
	}
	if !force {
		if v, err := runscVersion(ctx, dst); err == nil && current(v) {
			fmt.Fprintf(out, "heavy: runsc %s present, nothing to build\n", heavy.RunscVersion)
			return nil
		}
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("runsc is built from source and needs a Go toolchain (go 1.26 or newer) on PATH: %w", err)
	}
	tmpDir, err := os.MkdirTemp(l.BinDir(), ".runsc-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmpDir)
	ldflags := "-X gvisor.dev/gvisor/runsc/version.version=" + heavy.RunscVersion
	var cmd *exec.Cmd
	if sourceRoot != "" {
		cmd = exec.CommandContext(ctx, goBin, "build", "-trimpath", "-ldflags", ldflags, "-o", filepath.Join(tmpDir, "runsc"), heavy.RunscMain)
		cmd.Dir = sourceRoot
		fmt.Fprintf(out, "heavy: building runsc %s (%s) from go.mod's pin (a few minutes the first time)\n", heavy.RunscVersion, heavy.RunscBuild)
	} else {
		cmd = exec.CommandContext(ctx, goBin, "install", "-trimpath", "-ldflags", ldflags, heavy.RunscModule+"@"+heavy.RunscVersion)
		cmd.Dir = tmpDir
		cmd.Env = append(cmd.Env, "GOBIN="+tmpDir, "GOFLAGS=-mod=mod")
		fmt.Fprintf(out, "heavy: installing runsc %s from the module proxy (a few minutes the first time)\n", heavy.RunscVersion)
	}
	cmd.Env = append(append(os.Environ(), cmd.Env...), "CGO_ENABLED=0")
	t := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, lastLines(string(b), 5))
	}
	tmp := filepath.Join(tmpDir, "runsc")
	if v, err := runscVersion(ctx, tmp); err != nil || !current(v) {
		return fmt.Errorf("the built runsc reports version %q (%v), want %s", v, err, heavy.RunscVersion)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	fmt.Fprintf(out, "heavy: runsc %s built in %v: %s\n", heavy.RunscVersion, time.Since(t).Round(time.Second), dst)
	return nil
}

func runscVersion(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, path, "--version").Output()
	return strings.TrimSpace(string(b)), err
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
