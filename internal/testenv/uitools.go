package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// Chromium is where Debian's chromium package puts the browser the console's browser tests drive.
const Chromium = "/usr/bin/chromium"

// Browser is what the web console's browser tests run: Debian's Chromium driven by playwright-core
// (pinned in scripts/ui-tools/package.json) on Node 22 (scripts/mcp-tools.sh).
type Browser struct {
	// Chromium is the browser's executable.
	Chromium string
	// Node is Node 22.
	Node string
	// Modules is the node_modules directory that holds playwright-core (NODE_PATH for a script).
	Modules string
}

// Env is the environment to run a browser script in: playwright-core found through NODE_PATH,
// the browser's path in AGENTBOX_CHROMIUM, and no browser download ever attempted.
func (b Browser) Env() []string {
	return append(os.Environ(), "NODE_PATH="+b.Modules, "AGENTBOX_CHROMIUM="+b.Chromium, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1")
}

var uiToolsInstall = npmInstall{script: "scripts/ui-tools.sh", what: "playwright-core"}

// RequireBrowser returns the browser tests' tools, installing playwright-core once per test binary
// with scripts/ui-tools.sh (cached). It skips t (or fails it, see Required) only when Chromium is
// not installed (scripts/host-deps.sh chromium) or the npm registry cannot be reached; any other
// failure fails t.
func RequireBrowser(t testing.TB) Browser {
	t.Helper()
	if _, err := os.Stat(Chromium); err != nil {
		Skip(t, "needs Chromium at "+Chromium+" (apt-get install chromium, or scripts/host-deps.sh chromium)")
	}
	tools := RequireMCPTools(t) // Node 22
	dir := uiToolsInstall.dir(t)
	return Browser{Chromium: Chromium, Node: tools.Node, Modules: filepath.Join(dir, "node_modules")}
}
