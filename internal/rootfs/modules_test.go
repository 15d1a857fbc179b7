package rootfs

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

func TestModulesFromFiles(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "rootfs")
	for _, f := range []string{
		"usr/lib/python3.11/os.py",
		"usr/lib/python3.11/json/__init__.py",
		"usr/lib/python3.11/__pycache__/os.cpython-311.pyc",
		"usr/lib/python3.11/lib-dynload/_ssl.cpython-311-x86_64-linux-gnu.so",
		"usr/lib/python3.11/config-3.11-x86_64-linux-gnu/Makefile",
		"usr/lib/python3/dist-packages/numpy/__init__.py",
		"usr/lib/python3/dist-packages/numpy-1.24.2.egg-info/PKG-INFO",
		"usr/lib/python3/dist-packages/six.py",
		"usr/lib/python3/dist-packages/kiwisolver/_cext.cpython-311-x86_64-linux-gnu.so",
		"usr/lib/python3/dist-packages/_cffi_backend.cpython-311-x86_64-linux-gnu.so",
		"usr/lib/python3/dist-packages/README.txt",
	} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img := Image{Dir: dir, Manifest: Manifest{PythonVersion: "3.11.2", Python: map[string]PyDist{"pillow": {Name: "Pillow", Modules: []string{"PIL"}}}}}
	got, err := img.Modules()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PIL", "_cffi_backend", "_ssl", "json", "kiwisolver", "numpy", "os", "six"}
	if !slices.Equal(got, want) {
		t.Errorf("Modules() = %v, want %v", got, want)
	}
}

// The default image as built: what its file system shows matches what the image is for.
func TestModulesOfBuiltImage(t *testing.T) {
	s := Store{Dir: filepath.Join(config.DefaultDataDir(), "heavy", "images")}
	img, err := s.Get("python-datascience")
	if err != nil {
		testenv.Skip(t, "needs the default heavy image: "+err.Error())
	}
	mods, err := img.Modules()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"numpy", "pandas", "matplotlib", "scipy", "PIL", "json", "ssl", "_ssl", "ctypes", "sqlite3", "fcntl", "pwd", "math"} {
		if !slices.Contains(mods, m) {
			t.Errorf("%s is not listed; the image has it", m)
		}
	}
	for _, m := range []string{"torch", "tensorflow", "site-packages", "__pycache__"} {
		if slices.Contains(mods, m) {
			t.Errorf("%s is listed", m)
		}
	}
	t.Logf("%d modules", len(mods))
}
