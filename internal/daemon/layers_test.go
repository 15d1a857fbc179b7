package daemon_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLayers holds the tree's shape (README, "Where a request goes"): the core imports no runtime
// and no adapter; runtimes do not import each other; and no package but the wiring and the
// per-tier tools reaches a runtime. A new tier or front door that breaks one of these fails here,
// not in a reviewer's reading.
func TestLayers(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := modulePackages(t, root)

	// The core: its types, interfaces and Manager, importing nothing of the module's adapters.
	for _, dep := range deps(t, root, "internal/sandbox") {
		t.Errorf("the core (internal/sandbox) imports %s", dep)
	}

	// Runtimes: each tier's packages import no other tier's.
	tierOf := func(p string) string {
		rest, ok := strings.CutPrefix(p, "internal/runtimes/")
		if !ok {
			return ""
		}
		tier, _, _ := strings.Cut(rest, "/")
		return tier
	}
	for _, p := range pkgs {
		tier := tierOf(p)
		if tier == "" {
			continue
		}
		for _, dep := range deps(t, root, p) {
			if other := tierOf(dep); other != "" && other != tier {
				t.Errorf("runtime package %s imports %s, another tier's", p, dep)
			}
		}
	}

	// Who may reach a runtime: the wiring (internal/daemon) and what builds on it (the CLI, the
	// command, the tests' engine in daemontest), and the per-tier tools: setup builds each tier's artifacts, the bench measures
	// each tier. Everything else (the core, the router, the front doors and what they share,
	// governance, the guest side) reaches runtimes only through the core's interfaces.
	mayReach := []string{"internal/daemon", "internal/daemon/daemontest", "internal/cli", "internal/setup", "internal/bench", "cmd/agentbox"}
	for _, p := range pkgs {
		if tierOf(p) != "" || slices.Contains(mayReach, p) {
			continue
		}
		for _, dep := range deps(t, root, p) {
			if tierOf(dep) != "" {
				t.Errorf("%s imports %s: only the wiring and the per-tier tools reach a runtime", p, dep)
				break
			}
		}
	}
}

// modulePackages lists the module's packages under internal/ and cmd/ that have Go files (tests
// and testdata aside), as paths relative to the module.
func modulePackages(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	for _, top := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			files, _ := filepath.Glob(filepath.Join(path, "*.go"))
			for _, f := range files {
				if !strings.HasSuffix(f, "_test.go") {
					rel, _ := filepath.Rel(root, path)
					out = append(out, filepath.ToSlash(rel))
					break
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
