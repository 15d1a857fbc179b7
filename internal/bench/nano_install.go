package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// What the bench installs when it is missing. Each step is idempotent: it checks first and says
// what it did.

// DefaultPyodideVersion is the npm pyodide package the bench installs. 0.25.1 runs CPython 3.11,
// the version of the native baseline, so the Pyodide figures compare engines, not interpreter
// releases (3.12 and later changed the interpreter's speed on their own).
const DefaultPyodideVersion = "0.25.1"

// ensureBwrap returns the path of bwrap, installing Debian's bubblewrap package with apt-get if it
// is missing.
func ensureBwrap(ctx context.Context, log io.Writer) (path, note string, err error) {
	if p, err := exec.LookPath("bwrap"); err == nil {
		return p, "", nil
	}
	apt, err := exec.LookPath("apt-get")
	if err != nil {
		return "", "", errors.New("bwrap is not installed and apt-get is not available: install bubblewrap yourself")
	}
	if os.Geteuid() != 0 {
		return "", "", errors.New("bwrap is not installed: run `apt-get install bubblewrap` as root (the bench installs it itself when run as root)")
	}
	fmt.Fprintln(log, "bench: bubblewrap is missing; installing the Debian package with `apt-get install -y bubblewrap`")
	install := func() error {
		return runLogged(ctx, log, apt, "install", "-y", "--no-install-recommends", "bubblewrap")
	}
	if err := install(); err != nil {
		fmt.Fprintln(log, "bench: apt-get install failed; running `apt-get update` and trying again")
		if err := runLogged(ctx, log, apt, "update"); err != nil {
			return "", "", fmt.Errorf("apt-get update: %w", err)
		}
		if err := install(); err != nil {
			return "", "", fmt.Errorf("apt-get install bubblewrap: %w", err)
		}
	}
	p, err := exec.LookPath("bwrap")
	if err != nil {
		return "", "", errors.New("apt-get installed bubblewrap but bwrap is not on PATH")
	}
	return p, "installed Debian package bubblewrap with apt-get (it was missing)", nil
}

// ensurePyodide installs the npm package pyodide@version into dir (npm install --prefix dir) unless
// that version is already there, and writes the driver script next to it. It returns the driver's
// path.
func ensurePyodide(ctx context.Context, dir, version string, log io.Writer) (driver, note string, err error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", "", errors.New("node is not installed: install Node.js (Debian: apt-get install nodejs npm)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	if have := installedNPMVersion(dir, "pyodide"); have != version {
		npm, err := exec.LookPath("npm")
		if err != nil {
			return "", "", errors.New("npm is not installed: install it (Debian: apt-get install npm)")
		}
		if have == "" {
			fmt.Fprintf(log, "bench: installing npm package pyodide@%s into %s\n", version, dir)
		} else {
			fmt.Fprintf(log, "bench: replacing pyodide@%s in %s with pyodide@%s\n", have, dir, version)
		}
		if err := runLogged(ctx, log, npm, "install", "--prefix", dir, "--no-audit", "--no-fund",
			"--loglevel=error", "--save-exact", "pyodide@"+version); err != nil {
			return "", "", fmt.Errorf("npm install pyodide@%s (is the npm registry reachable?): %w", version, err)
		}
		if have := installedNPMVersion(dir, "pyodide"); have != version {
			return "", "", fmt.Errorf("npm install left pyodide version %q in %s, want %s", have, dir, version)
		}
		note = fmt.Sprintf("installed npm package pyodide@%s into %s", version, dir)
	}
	driver = filepath.Join(dir, "driver.cjs")
	if err := writeIfChanged(driver, pyodideDriver); err != nil {
		return "", "", err
	}
	return driver, note, nil
}

func installedNPMVersion(prefix, pkg string) string {
	b, err := os.ReadFile(filepath.Join(prefix, "node_modules", pkg, "package.json"))
	if err != nil {
		return ""
	}
	var p struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(b, &p) != nil {
		return ""
	}
	return p.Version
}

func writeIfChanged(path string, content []byte) error {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(content) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// runLogged runs a command with its output sent to log, and returns an error that carries the
// last lines of that output if it fails.
func runLogged(ctx context.Context, log io.Writer, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	var tail tailBuffer
	cmd.Stdout = io.MultiWriter(log, &tail)
	cmd.Stderr = io.MultiWriter(log, &tail)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, tail.String())
	}
	return nil
}

// tailBuffer keeps the last 2 KB written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2048 {
		t.b = t.b[len(t.b)-2048:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return strings.TrimSpace(string(t.b)) }
