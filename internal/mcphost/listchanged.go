package mcphost

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A hosted server that says its lists changed (notifications/tools/list_changed,
// prompts/list_changed, resources/list_changed) has that relayed to every session of
// /mcp/servers/NAME, which then lists again. The tools are not taken on the server's word: the
// gateway lists them itself and holds the new list to the pin, as at a start, so a definition
// changed while the server runs (a rug pull that does not wait for a restart) is refused until a
// person approves it, and the refusal is an audit record (mcp.refused).
//
// The SDK sends a list-changed notification when a server's own list changes (Server.AddTool and
// the like), debounced; the gateway's session servers list nothing of their own (the lists are
// forwarded, handler.go), so a change is made to one of them with an entry added and removed at
// once (poke), which no list ever shows: tools/list, prompts/list and resources/list are
// answered by the gateway before the SDK's own lists are read.

// listKind names a list a hosted server can say changed.
type listKind int

const (
	listTools listKind = iota
	listPrompts
	listResources
)

func (k listKind) String() string {
	return [...]string{"tools", "prompts", "resources"}[k]
}

// listChangedTimeout bounds the gateway's own tools/list after a server said its tools changed.
const listChangedTimeout = 30 * time.Second

// listChangedHandlers are the client options that relay a hosted server's list changes.
func (m *Manager) listChangedHandlers(name string, opts *mcp.ClientOptions) {
	opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) {
		// Not on the client's own goroutine: listing needs the answer it would be reading.
		go m.toolsChanged(name)
	}
	opts.PromptListChangedHandler = func(context.Context, *mcp.PromptListChangedRequest) {
		m.relayListChanged(name, listPrompts)
	}
	opts.ResourceListChangedHandler = func(context.Context, *mcp.ResourceListChangedRequest) {
		m.relayListChanged(name, listResources)
	}
}

// toolsChanged lists the tools of server name again after it said they changed, holds them to
// the pin, and tells the gateway's sessions.
func (m *Manager) toolsChanged(name string) {
	h, cs := m.upstream(name)
	if cs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), listChangedTimeout)
	defer cancel()
	var tools []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			m.logf("hosted MCP server %s: tools/list after notifications/tools/list_changed: %v", name, err)
			return
		}
		tools = append(tools, t)
	}
	h.mu.Lock()
	if h.session != cs { // stopped or started again since: that start listed and pinned
		h.mu.Unlock()
		return
	}
	cur := pinOf(name, h.imageHash, tools)
	h.tools = tools
	var rec *Record
	if cur.Hash != h.pin.Hash {
		h.refused = cur.diff(h.pin)
		rec = &Record{Kind: "mcp.refused", Server: name, Decision: "refuse", PinHash: cur.Hash, Changes: h.refused, Flagged: flaggedList(cur),
			Reason: "tool definitions changed while the server ran (notifications/tools/list_changed) differ from the pinned ones"}
	} else {
		h.refused = nil // back to what was pinned
	}
	h.mu.Unlock()
	if rec != nil {
		m.record(ctx, *rec)
	}
	m.relayListChanged(name, listTools)
}

// relayListChanged tells every session of /mcp/servers/NAME that the server's list of kind
// changed.
func (m *Manager) relayListChanged(name string, kind listKind) {
	m.gw.mu.Lock()
	var to []*mcp.Server
	for _, g := range m.gw.byID {
		if g.server == name && !g.ended && g.srv != nil {
			to = append(to, g.srv)
		}
	}
	m.gw.mu.Unlock()
	// And the server of requests in no session: a client of the newer protocol follows lists
	// with subscriptions/listen there.
	m.mu.Lock()
	h := m.hosts[name]
	m.mu.Unlock()
	if h != nil {
		h.mu.Lock()
		if h.built != nil {
			to = append(to, h.built)
		}
		h.mu.Unlock()
	}
	for _, srv := range to {
		poke(srv, kind)
	}
}

// pokeName is the entry poke adds and removes at once; no list shows it.
const pokeName = "agentbox.list-changed"

// poke makes srv send the list-changed notification of kind to its sessions (the SDK sends it
// for a change of the server's own list, once for changes close together).
func poke(srv *mcp.Server, kind listKind) {
	switch kind {
	case listTools:
		srv.AddTool(&mcp.Tool{Name: pokeName, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return nil, fmt.Errorf("no such tool")
			})
		srv.RemoveTools(pokeName)
	case listPrompts:
		srv.AddPrompt(&mcp.Prompt{Name: pokeName}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return nil, fmt.Errorf("no such prompt")
		})
		srv.RemovePrompts(pokeName)
	case listResources:
		uri := "agentbox:" + pokeName
		srv.AddResource(&mcp.Resource{URI: uri, Name: pokeName}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return nil, fmt.Errorf("no such resource")
		})
		srv.RemoveResources(uri)
	}
}
