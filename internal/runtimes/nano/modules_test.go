package nano

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The module list is measured in real nano, and every module on it imports there: probe through
// the jailed workers, then import each listed module again, in fresh interpreters, with a plain
// import statement. Modules nano is known to lack are not on it.
func TestModuleList(t *testing.T) {
	a := artifacts(t)
	r := newRuntime(t, 1, 0)
	ctx := context.Background()
	m, err := ProbeModules(ctx, a, r.Run)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d importable, %d not, probe took %v", len(m.Available), len(m.Unavailable), m.ProbeTime)
	if m.Version[0] != 3 || len(m.Available) < 200 {
		t.Fatalf("probe found Python %v with %d modules", m.Version, len(m.Available))
	}
	for _, name := range []string{"json", "re", "asyncio", "sqlite3", "xml.etree.ElementTree", "zoneinfo", "email.mime.text"} {
		if !slices.Contains(m.Available, name) {
			t.Errorf("%s is not listed", name)
		}
	}
	for _, name := range []string{"numpy", "pandas", "tkinter", "ctypes", "ssl", "_ssl", "multiprocessing"} {
		if slices.Contains(m.Available, name) {
			t.Errorf("%s is listed; nano cannot import it", name)
		}
	}
	for _, name := range []string{"tkinter", "ctypes", "ssl"} {
		if e, ok := m.Unavailable[name]; !ok || !strings.Contains(e, "ModuleNotFoundError") {
			t.Errorf("unavailable[%s] = %q, want the ModuleNotFoundError it raised", name, e)
		}
	}
	if slices.ContainsFunc(m.Available, func(n string) bool { return strings.HasSuffix(n, ".__main__") }) {
		t.Error("a __main__ module was imported")
	}

	// Import each listed module again, 100 to an interpreter.
	for chunk := range slices.Chunk(m.Available, 100) {
		var code strings.Builder
		code.WriteString("import sys, io\nbad = []\nout = sys.stdout\n")
		for _, name := range chunk {
			stmt := "import " + name
			if strings.Contains(name, "-") { // _sysconfigdata__wasi_wasm32-wasi: importlib only
				stmt = fmt.Sprintf("__import__(%q)", name)
			}
			fmt.Fprintf(&code, "try:\n    sys.stdout = io.StringIO()\n    %s\nexcept BaseException as e:\n    bad.append('%s: %%r' %% e)\nfinally:\n    sys.stdout = out\n", stmt, name)
		}
		code.WriteString("print('\\n'.join(bad))\n")
		res, err := r.Run(ctx, &sandbox.RunRequest{Code: code.String(), Limits: probeLimits})
		if err != nil {
			t.Fatal(err)
		}
		if res.Error != nil || strings.TrimSpace(res.Stdout) != "" {
			t.Errorf("listed modules that do not import: %s %v", res.Stdout, res.Error)
		}
	}

	// What setup wrote for this build says the same.
	if disk, err := ReadModules(a); err == nil {
		if !slices.Equal(disk.Available, m.Available) {
			t.Errorf("%s lists %d modules, the probe now finds %d", a.Modules(), len(disk.Available), len(m.Available))
		}
	} else if !errors.Is(err, ErrNoModules) {
		t.Error(err)
	}
}

// The list records the build it describes: another build's list, or none, is ErrNoModules.
func TestModuleListFile(t *testing.T) {
	a := Artifacts{Dir: t.TempDir()}
	if err := os.WriteFile(a.Wasm(), []byte("a build"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadModules(a); !errors.Is(err, ErrNoModules) {
		t.Fatalf("missing list: %v, want ErrNoModules", err)
	}
	build, err := a.BuildHashes()
	if err != nil {
		t.Fatal(err)
	}
	want := ModuleList{Build: build, Version: [3]int{3, 11, 2}, Available: []string{"json"}, Unavailable: map[string]string{"ssl": "ModuleNotFoundError: No module named '_ssl'"},
		Probed: time.Now().UTC().Truncate(time.Second)}
	if err := WriteModules(a, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadModules(a)
	if err != nil || !slices.Equal(got.Available, want.Available) || got.Unavailable["ssl"] != want.Unavailable["ssl"] {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if err := os.WriteFile(a.Wasm(), []byte("a rebuilt build"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadModules(a); !errors.Is(err, ErrNoModules) {
		t.Fatalf("stale list: %v, want ErrNoModules", err)
	}
	if _, err := os.Stat(filepath.Join(a.Dir, ModulesFile+".tmp")); !os.IsNotExist(err) {
		t.Error("a temporary file was left behind")
	}
}
