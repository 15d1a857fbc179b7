package egress

import (
	"strings"
	"testing"
	"time"
)

const mcpPolicy = `
name: tools
allow: [api.allowed.test]
mcp:
  tools:
    allow: [echo, "files__read_*", get-sum]
    deny: [get-sum]
  prompt_scan: block
intents:
  research:
    allow: [api.research.test]
    mcp:
      tools:
        allow: [fetch]
        deny: ["files__read_secret*"]
  tools-only:
    mcp:
      tools:
        allow: [write_file]
`

// The tool lists of a profile and of its intents: deny wins (over the profile's allow and the
// intent's), a profile's allow list refuses what it does not name unless the current intent
// opens it, an entry may name SERVER__tool and hold '*', and each refusal names the list.
func TestDecideTool(t *testing.T) {
	p, err := ParseProfile("tools.yaml", []byte(mcpPolicy))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		intent, server, tool string
		allowed              bool
		list                 string // part of the refusal
	}{
		{"", "everything", "echo", true, ""},
		{"", "files", "read_text_file", true, ""},
		{"", "other", "read_text_file", false, "not in the mcp.tools.allow list of egress profile tools"},
		{"", "everything", "get-sum", false, `named by the mcp.tools.deny list of egress profile tools (entry "get-sum")`},
		{"research", "everything", "get-sum", false, "mcp.tools.deny list of egress profile tools"},
		{"", "web", "fetch", false, "not in the mcp.tools.allow list of egress profile tools (intent research would open it)"},
		{"research", "web", "fetch", true, ""},
		{"research", "files", "read_secret_file", false, `the mcp.tools.deny list of intent research (egress profile tools) (entry "files__read_secret*")`},
		{"research", "files", "write_file", false, "not in the mcp.tools.allow list of egress profile tools nor of its intent research"},
		{"tools-only", "files", "write_file", true, ""},
		{"unknown", "everything", "echo", true, ""},
	}
	for _, c := range cases {
		d := p.DecideTool(c.intent, c.server, c.tool)
		if d.Allowed != c.allowed || !d.Enforced || !strings.Contains(d.Reason(c.server, c.tool), c.list) {
			t.Errorf("%s %s__%s: allowed=%v %q, want %v %q", c.intent, c.server, c.tool, d.Allowed, d.Reason(c.server, c.tool), c.allowed, c.list)
		}
	}
	if !p.BlocksPrompts() {
		t.Error("prompt_scan: block does not block")
	}

	// No mcp section: every tool, prompts flagged. "allow: []": none. Warn mode: not enforced.
	plain, _ := ParseProfile("p.yaml", []byte("name: plain\n"))
	if d := plain.DecideTool("", "s", "anything"); !d.Allowed || plain.BlocksPrompts() || plain.MCP.PromptScan != "flag" {
		t.Errorf("a profile without mcp: %+v %q", d, plain.MCP.PromptScan)
	}
	none, _ := ParseProfile("n.yaml", []byte("name: none\nmcp:\n  tools:\n    allow: []\n"))
	if d := none.DecideTool("", "s", "echo"); d.Allowed {
		t.Error(`"allow: []" allowed a tool`)
	}
	warn, _ := ParseProfile("w.yaml", []byte("name: w\nmode: warn\nmcp:\n  tools:\n    deny: [echo]\n  prompt_scan: block\n"))
	if d := warn.DecideTool("", "s", "echo"); d.Allowed || d.Enforced || warn.BlocksPrompts() {
		t.Errorf("warn mode: %+v", d)
	}
}

func TestMCPPolicyErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"name: x\nmcp:\n  prompt_scan: loud\n", `x.yaml:2: mcp: prompt_scan "loud", use flag or block`},
		{"name: x\nmcp:\n  tools:\n    deny: [\"a b\"]\n", `mcp: tool "a b"`},
		{"name: x\nmcp:\n  tool: {}\n", "field tool not found"},
		{"name: x\nintents:\n  w:\n    mcp:\n      tools:\n        allow: [\"x/y\"]\n", `intent w: mcp: tool "x/y"`},
		{"name: x\nintents:\n  w:\n    mcp:\n      prompt_scan: block\n", "field prompt_scan not found"},
	} {
		_, err := ParseProfile("x.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.yaml, err, c.want)
		}
	}
}

// Violations another gate reports (the MCP gateway's refusals) count towards the same alerts as
// the gateway's own: at the profile's threshold an alert is recorded with its source, and the
// session is ended when the profile says so, unless the subject is not a session to end.
func TestViolationAlerts(t *testing.T) {
	f := newFixture(t, testPolicy, nil)
	ev := Event{Method: "tools/call", URL: "mcp://everything/get-sum", Decision: "denied", Reason: "denied: the tool get-sum is named by a deny list"}
	for range 3 {
		if err := f.g.Violation(Sandbox{Session: "mcp:everything", Profile: "test"}, ev, "mcp", false); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		f.g.Violation(Sandbox{Session: "s9", Profile: "test"}, ev, "mcp", true)
	}
	select {
	case s := <-f.ended:
		if s != "s9" {
			t.Fatalf("ended %q", s)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("three MCP violations did not end the session")
	}
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	if len(f.rec.alerts) != 2 {
		t.Fatalf("alerts: %+v", f.rec.alerts)
	}
	for _, a := range f.rec.alerts {
		if a.Source != "mcp" || a.Violations != 3 || a.Last.URL != ev.URL || a.Ended != (a.Session == "s9") {
			t.Errorf("alert: %+v", a)
		}
	}
	if len(f.rec.events) != 0 {
		t.Errorf("violations were recorded as egress events: %+v", f.rec.events)
	}
	if err := f.g.Violation(Sandbox{Session: "s", Profile: "nope"}, ev, "mcp", true); err == nil {
		t.Error("an unknown profile was not an error")
	}
}
