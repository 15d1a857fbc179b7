package setup

import (
	"context"
	"fmt"
	"github.com/agentbox-dev/agentbox/internal/digest"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/pybuild"
)

// DefaultNanoSource is the build setup installs unless told otherwise: the optimised build from
// Debian's CPython source runs code about twice as fast as the npm build and starts 2-3x faster
// (figures in docs/RATIONALE.md).
const DefaultNanoSource = "source"

// buildSource runs the embedded build script into a build directory that persists in the data
// directory (the script caches by its own hash there), then copies the result into dir.
func buildSource(ctx context.Context, dataDir, dir string, force bool, out io.Writer) (manifest, error) {
	buildDir := filepath.Join(dataDir, "build", "python-wasi")
	if err := os.MkdirAll(buildDir, 0o755); err != nil {
		return manifest{}, err
	}
	script := filepath.Join(dataDir, "build", "build-python-wasi.sh")
	if err := os.WriteFile(script, pybuild.Script, 0o755); err != nil {
		return manifest{}, err
	}
	if force {
		_ = os.Remove(filepath.Join(buildDir, ".stamp"))
	}
	if os.Geteuid() != 0 {
		return manifest{}, fmt.Errorf("building CPython for WASI installs Debian packages and needs root: run `sudo agentbox setup`, or use --source npm")
	}
	fmt.Fprintf(out, "nano: building CPython for WASI from Debian's source (first time: several minutes; log in %s)\n", filepath.Join(buildDir, ".build", "logs"))
	cmd := exec.CommandContext(ctx, "bash", script, buildDir)
	cmd.Stdout = out
	cmd.Stderr = out
	if err := cmd.Run(); err != nil {
		return manifest{}, fmt.Errorf("building CPython for WASI failed (%v): the lines above say in which step", err)
	}
	m := manifest{Source: "source", SHA256: map[string]string{}, Recipe: recipeHash()}
	for _, name := range []string{nano.WasmFile, nano.StdlibFile} {
		if err := copyFile(filepath.Join(buildDir, name), filepath.Join(dir, name)); err != nil {
			return manifest{}, err
		}
		sum, err := digest.File(filepath.Join(dir, name))
		if err != nil {
			return manifest{}, err
		}
		m.SHA256[name] = sum
	}
	m.Describe = "Debian CPython 3.11 for WASI"
	if info, err := os.ReadFile(filepath.Join(buildDir, "BUILDINFO")); err == nil {
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "opt: "); ok {
				m.Describe += ", " + strings.Fields(v)[0]
			}
		}
		_ = os.WriteFile(filepath.Join(dir, "BUILDINFO"), info, 0o644)
	}
	return m, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
