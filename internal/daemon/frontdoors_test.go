package daemon_test

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/agentbox-dev/agentbox/"

// The front doors the daemon mounts (http.go), and what they share.
var (
	frontDoors = []string{"internal/httpapi", "internal/mcpserver", "internal/webui", "internal/e2b", "internal/nodeapi", "internal/gateway"}
	shared     = []string{"internal/apiwire", "internal/auth"}
)

// TestFrontDoorsAreSiblings holds the front doors' layering: no front door imports another, the
// daemon or the CLI, or reaches a runtime but through the core's interfaces; what they share
// imports no front door (a package below a door's is that door's); and the CLI reaches the HTTP API only through the daemon.
func TestFrontDoorsAreSiblings(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	// doorOf is the front door a package belongs to: the door's package or one below it (the
	// E2B door's in-sandbox services, internal/e2b/envd, are the E2B door's).
	doorOf := func(pkg string) string {
		for _, d := range frontDoors {
			if pkg == d || strings.HasPrefix(pkg, d+"/") {
				return d
			}
		}
		return ""
	}
	forbidden := func(pkg string) []string {
		var out []string
		for _, dep := range deps(t, root, pkg) {
			switch {
			case doorOf(dep) != "" && doorOf(dep) != doorOf(pkg),
				dep == "internal/daemon", dep == "internal/cli",
				strings.HasPrefix(dep, "internal/runtimes/"):
				out = append(out, dep)
			}
		}
		return out
	}
	for _, pkg := range modulePackages(t, root) {
		if doorOf(pkg) == "" {
			continue
		}
		if bad := forbidden(pkg); len(bad) > 0 {
			t.Errorf("front door %s imports %v", pkg, bad)
		}
	}
	for _, pkg := range shared {
		bad := forbidden(pkg)
		for _, dep := range deps(t, root, pkg) {
			if doorOf(dep) != "" {
				bad = append(bad, dep)
			}
		}
		if len(bad) > 0 {
			t.Errorf("shared layer %s imports %v", pkg, bad)
		}
	}
	p, err := build.ImportDir(filepath.Join(root, "internal/cli"), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range p.Imports {
		if door := doorOf(strings.TrimPrefix(imp, module)); door != "" {
			t.Errorf("internal/cli imports %s (of front door %s); it serves through internal/daemon", imp, door)
		}
	}
}

// deps returns the module's packages pkg imports, directly or not, without tests, as paths
// relative to the module ("internal/sandbox").
func deps(t *testing.T, root, pkg string) []string {
	t.Helper()
	seen := map[string]bool{}
	var walk func(string)
	walk = func(rel string) {
		p, err := build.ImportDir(filepath.Join(root, rel), 0)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		for _, imp := range p.Imports {
			dep, ok := strings.CutPrefix(imp, module)
			if ok && !seen[dep] {
				seen[dep] = true
				walk(dep)
			}
		}
	}
	walk(pkg)
	out := make([]string, 0, len(seen))
	for dep := range seen {
		out = append(out, dep)
	}
	slices.Sort(out)
	return out
}
