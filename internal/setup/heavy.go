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
	if err := buildRunsc(ctx, l, root, cfg.DataDir, opts.Force, out); err != nil {
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
// requires (the `tool` directive pins it), patched by scripts/gvisor-patch.sh (copy-behind: a
// forked child copies what its parent wrote since its last fork, so the parent's next writes do
// not), so the binary runs what `go tool runsc` would run plus our sentry's memory release and
// that patch; elsewhere it installs upstream runsc at that version from the module proxy,
// unpatched. The version string stays heavy.RunscVersion either way (gVisor restores only
// checkpoints taken by the same version string, and neither change alters what a checkpoint
// holds, so sessions paused before a rebuild still resume); a cached binary of ours is current
// when its `--version` also says heavy.RunscBuild and the stamp beside it
// (Runsc(version)+".build") names the tree's patch. Always static: a dynamically linked runsc
// cannot re-execute itself after pivoting into the sandbox's root (notes/gvisor.md).
func buildRunsc(ctx context.Context, l heavy.Layout, sourceRoot, dataDir string, force bool, out io.Writer) error {
	dst := l.Runsc(heavy.RunscVersion)
	stamp := dst + ".build"
	var patchFlags []string
	wantStamp := ""
	if sourceRoot != "" {
		key, flags, err := gvisorPatch(ctx, sourceRoot, dataDir)
		if err != nil {
			return err
		}
		patchFlags, wantStamp = flags, "gvisor-patch "+key+"\n"
	}
	current := func(v string) bool {
		return strings.Contains(v, heavy.RunscVersion) && (sourceRoot == "" || strings.Contains(v, heavy.RunscBuild))
	}
	// Outside the source tree any runsc at the version is current, ours (patched, stamped) as
	// well as upstream's: an agentbox started elsewhere on a data directory a source build made
	// (a cluster node's setup task) must not put upstream runsc in place of the tree's.
	stampOK := func(b []byte) bool { return sourceRoot == "" || string(b) == wantStamp }
	if !force {
		b, _ := os.ReadFile(stamp)
		if v, err := runscVersion(ctx, dst); err == nil && current(v) && stampOK(b) {
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
		args := append(append([]string{"build", "-trimpath"}, patchFlags...), "-ldflags", ldflags, "-o", filepath.Join(tmpDir, "runsc"), heavy.RunscMain)
		cmd = exec.CommandContext(ctx, goBin, args...)
		cmd.Dir = sourceRoot
		fmt.Fprintf(out, "heavy: building runsc %s (%s, scripts/gvisor-patch) from go.mod's pin (a few minutes the first time)\n", heavy.RunscVersion, heavy.RunscBuild)
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
	// The stamp goes after the binary: a crash between the two leaves a stamp that differs, and
	// the next setup builds again (never a stamp that claims a patch the binary lacks). Outside
	// the source tree no stamp is wanted, and one left by a source build goes.
	_ = os.Remove(stamp)
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	if wantStamp != "" {
		if err := os.WriteFile(stamp, []byte(wantStamp), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "heavy: runsc %s built in %v: %s\n", heavy.RunscVersion, time.Since(t).Round(time.Second), dst)
	return nil
}

// gvisorPatch runs scripts/gvisor-patch.sh in the source tree: the patch's key and the go flags
// that build runsc with it (the patched copy of the module goes under dataDir).
func gvisorPatch(ctx context.Context, sourceRoot, dataDir string) (key string, flags []string, err error) {
	script := filepath.Join(sourceRoot, "scripts", "gvisor-patch.sh")
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
		cmd.Dir = sourceRoot
		cmd.Env = append(os.Environ(), "AGENTBOX_DATA_DIR="+dataDir)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("%s %s: %v: %s", script, strings.Join(args, " "), err, lastLines(stderr.String(), 5))
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		return strings.TrimSpace(lines[len(lines)-1]), nil
	}
	if key, err = run("-key"); err != nil {
		return "", nil, err
	}
	f, err := run()
	if err != nil {
		return "", nil, err
	}
	return key, strings.Fields(f), nil
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
