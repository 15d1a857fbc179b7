package setup

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// The module-list step on a copy of the installed build: the first run probes the build and
// writes the list, the second finds it and does nothing, and a changed build is probed again.
func TestNanoModulesStep(t *testing.T) {
	src := nano.Artifacts{Dir: nano.Dir(config.Default())}
	if err := src.Check(); err != nil {
		testenv.Skip(t, err.Error())
	}
	a := nano.Artifacts{Dir: filepath.Join(t.TempDir(), "nano")}
	// Link the build and its compilation cache (some 50 MB) where the file system allows.
	err := filepath.WalkDir(src.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src.Dir, p)
		dst := filepath.Join(a.Dir, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if rel == nano.ModulesFile {
			return nil
		}
		return linkOrCopy(p, dst)
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var out bytes.Buffer
	if err := nanoModules(ctx, a, false, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "nano: probed the build:") {
		t.Errorf("first run says %q", out.String())
	}
	m, err := nano.ReadModules(a)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(m.Available, "json") || slices.Contains(m.Available, "numpy") {
		t.Errorf("list: %d modules, json and not numpy expected", len(m.Available))
	}
	out.Reset()
	if err := nanoModules(ctx, a, false, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "module list present") {
		t.Errorf("second run is not idempotent: %q", out.String())
	}
	// A rebuilt interpreter (here: a list recorded for another build) makes the list stale.
	m.Build[nano.WasmFile] = strings.Repeat("0", 64)
	if err := nano.WriteModules(a, m); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := nanoModules(ctx, a, false, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "nano: probed the build:") {
		t.Errorf("a stale list was kept: %q", out.String())
	}
}

// linkOrCopy links src to dst, or copies it where a link cannot cross file systems.
func linkOrCopy(src, dst string) error {
	if os.Link(src, dst) == nil {
		return nil
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
