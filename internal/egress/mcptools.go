package egress

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// MCP is what a profile says about the hosted MCP servers governed under it (internal/mcphost):
// which of their tools may be called, and what a hidden instruction found in a tool's
// description or a call's result gets. It applies to a hosted server whose profile this is, and
// to a call that names a session (the call's `_meta` or header) whose profile this is.
type MCP struct {
	Tools ToolLists `yaml:"tools"`
	// PromptScan is what a tool description or a result the prompt scanner flags gets: flag (the
	// default: served, marked in its _meta and recorded) or block (the tool is left out of
	// tools/list and refused; the result is withheld).
	PromptScan string `yaml:"prompt_scan"`
}

// IntentMCP is what an intent opens or closes among MCP tools while it is current.
type IntentMCP struct {
	Tools ToolLists `yaml:"tools"`
}

// ToolLists are allow and deny lists of MCP tools. An entry is a tool's name ("read_file"), or
// the server's name and the tool's joined as on /mcp ("files__read_file"), and may hold '*'
// ("files__*", "*_file"). Deny wins. Allow unset: every tool not denied; "allow: []": none.
type ToolLists struct {
	Allow []string `yaml:"allow"`
	Deny  []string `yaml:"deny"`
}

// Defaults and values of MCP.PromptScan.
const (
	PromptScanFlag  = "flag"
	PromptScanBlock = "block"
)

var toolPatternRE = regexp.MustCompile(`^[A-Za-z0-9_.*-]{1,128}$`)

func (l ToolLists) check() error {
	for _, e := range append(append([]string{}, l.Allow...), l.Deny...) {
		if !toolPatternRE.MatchString(e) {
			return fmt.Errorf("tool %q: use a tool's name, SERVER__tool, with '*' for any characters", e)
		}
	}
	return nil
}

// match returns the first entry of list that names tool of server.
func match(list []string, server, tool string) (string, bool) {
	for _, e := range list {
		if ok, _ := path.Match(e, tool); ok {
			return e, true
		}
		if ok, _ := path.Match(e, server+"__"+tool); ok {
			return e, true
		}
	}
	return "", false
}

// ToolDecision is a profile's verdict on a call of an MCP tool.
type ToolDecision struct {
	Allowed bool
	// Enforced is false in warn mode: a refusal is recorded, not applied.
	Enforced bool
	// List names the list that refused (or, for a tool only an intent allows, opened) the call,
	// for the refusal and the record: "the mcp.tools.deny list of egress profile P".
	List string
	// Entry is the entry of a deny list that matched.
	Entry string
}

// DecideTool is the profile's verdict on calling tool of a hosted server while intent (may be
// "") is current: a deny entry of the profile or of the intent refuses; a profile's allow list,
// when set, must name the tool unless the intent's allow list does (an intent opens tools as it
// opens hosts). A disabled profile allows everything.
func (p *Profile) DecideTool(intent, server, tool string) ToolDecision {
	d := ToolDecision{Allowed: true, Enforced: p.Mode == ModeEnforce}
	if p.Mode == ModeDisabled {
		return d
	}
	in, hasIntent := p.Intents[intent]
	if e, ok := match(p.MCP.Tools.Deny, server, tool); ok {
		return ToolDecision{Enforced: d.Enforced, List: "the mcp.tools.deny list of egress profile " + p.Name, Entry: e}
	}
	if hasIntent {
		if e, ok := match(in.MCP.Tools.Deny, server, tool); ok {
			return ToolDecision{Enforced: d.Enforced, List: fmt.Sprintf("the mcp.tools.deny list of intent %s (egress profile %s)", intent, p.Name), Entry: e}
		}
	}
	if p.MCP.Tools.Allow == nil {
		return d
	}
	if _, ok := match(p.MCP.Tools.Allow, server, tool); ok {
		return d
	}
	if hasIntent {
		if _, ok := match(in.MCP.Tools.Allow, server, tool); ok {
			d.List = fmt.Sprintf("the mcp.tools.allow list of intent %s (egress profile %s)", intent, p.Name)
			return d
		}
	}
	list := "the mcp.tools.allow list of egress profile " + p.Name
	switch {
	case hasIntent:
		list += " nor of its intent " + intent
	case len(p.Intents) > 0:
		var opens []string
		for n, in := range p.Intents {
			if _, ok := match(in.MCP.Tools.Allow, server, tool); ok {
				opens = append(opens, n)
			}
		}
		if len(opens) > 0 {
			list += " (intent " + strings.Join(opens, " or ") + " would open it)"
		}
	}
	return ToolDecision{Enforced: d.Enforced, List: list}
}

// Reason is a refusal in words, naming the list: for the caller's tool error and the record.
func (d ToolDecision) Reason(server, tool string) string {
	if d.Allowed {
		return ""
	}
	if d.Entry != "" {
		return fmt.Sprintf("denied: the tool %q of hosted MCP server %s is named by %s (entry %q)", tool, server, d.List, d.Entry)
	}
	return fmt.Sprintf("denied: the tool %q of hosted MCP server %s is not in %s", tool, server, d.List)
}

// BlocksPrompts says whether the profile blocks what the prompt scanner flags in MCP tool
// descriptions and results (mcp.prompt_scan: block, in enforce mode).
func (p *Profile) BlocksPrompts() bool {
	return p.Mode == ModeEnforce && p.MCP.PromptScan == PromptScanBlock
}

// validateMCP checks the mcp section and the intents' and fills the defaults.
func (p *Profile) validateMCP(keyLine func(string) int) error {
	fail := func(key, format string, args ...any) error {
		return &PolicyError{File: p.file, Line: keyLine(key), Msg: key + ": " + fmt.Sprintf(format, args...)}
	}
	if err := p.MCP.Tools.check(); err != nil {
		return fail("mcp", "%v", err)
	}
	switch p.MCP.PromptScan {
	case "":
		p.MCP.PromptScan = PromptScanFlag
	case PromptScanFlag, PromptScanBlock:
	default:
		return fail("mcp", "prompt_scan %q, use flag or block", p.MCP.PromptScan)
	}
	for name, in := range p.Intents {
		if err := in.MCP.Tools.check(); err != nil {
			return fail("intents", "intent %s: mcp: %v", name, err)
		}
	}
	return nil
}
