package rootfs

import (
	"debug/elf"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Modules lists the top-level modules the image's python3 can import, read off its root file
// system: the standard library (its directory, lib-dynload, and the modules built into the
// interpreter, which export PyInit_<name>), the packages in dist-packages, and the import names
// the distributions' metadata gives. Nothing is typed by hand; a module the files do not show
// (a namespace package spread oddly) may be missing.
func (i Image) Modules() ([]string, error) {
	root := i.Rootfs()
	minor := pythonMinor(i.Manifest.PythonVersion)
	set := map[string]bool{}
	add := func(name string) {
		if isIdentifier(name) {
			set[name] = true
		}
	}
	stdlib := filepath.Join(root, "usr/lib", "python"+minor)
	if err := listModules(stdlib, add, "site-packages", "dist-packages", "lib-dynload"); err != nil {
		return nil, err
	}
	_ = listModules(filepath.Join(stdlib, "lib-dynload"), add)
	for _, dir := range []string{"usr/lib/python3/dist-packages", "usr/local/lib/python" + minor + "/dist-packages", "usr/lib/python" + minor + "/dist-packages"} {
		_ = listModules(filepath.Join(root, dir), add)
	}
	if f, err := elf.Open(filepath.Join(root, "usr/bin", "python"+minor)); err == nil {
		syms, _ := f.DynamicSymbols()
		for _, s := range syms {
			if name, ok := strings.CutPrefix(s.Name, "PyInit_"); ok && s.Section != elf.SHN_UNDEF {
				add(name)
			}
		}
		f.Close()
	}
	for _, d := range i.Manifest.Python {
		for _, m := range d.Modules {
			add(m)
		}
	}
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out, nil
}

// listModules calls add for each module in dir: name.py, name/ (a package or a namespace
// package), name.<abi>.so.
func listModules(dir string, add func(string), skip ...string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		n := e.Name()
		switch {
		case e.IsDir():
			if !strings.Contains(n, ".") && n != "__pycache__" && !slices.Contains(skip, n) {
				add(n)
			}
		case strings.HasSuffix(n, ".py"):
			add(strings.TrimSuffix(n, ".py"))
		case strings.HasSuffix(n, ".so"):
			name, _, _ := strings.Cut(n, ".")
			add(name)
		}
	}
	return nil
}

// pythonMinor turns "3.11.2" into "3.11"; "3" when the version is unknown.
func pythonMinor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return "3"
	}
	return parts[0] + "." + parts[1]
}

func isIdentifier(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
