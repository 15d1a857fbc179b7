package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// mcp forwards the stateless MCP front door (/mcp): a tool call that names a session (its
// session_id argument) goes to that session's node, as the session's HTTP routes do; anything
// else to a placed node (every node answers alike).
func (g *Gateway) mcp(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		g.placed(w, r)
		return
	}
	b, err := readBody(r)
	if err != nil {
		fail(w, err)
		return
	}
	if g.opts.MCPLists != nil && b.replayable() && listsAcrossNodes(b.buf) {
		r2 := r.Clone(r.Context())
		r2.Body, r2.ContentLength = io.NopCloser(bytes.NewReader(b.buf)), int64(len(b.buf))
		g.opts.MCPLists.ServeHTTP(w, r2)
		return
	}
	if sid := mcpSession(b); sid != "" {
		r.Body = nil
		g.sessionWith(w, r, sid, b)
		return
	}
	g.placedWith(w, r, b)
}

// mcpListTools are the /mcp tools whose answer spans sessions, so spans nodes in a cluster.
var mcpListTools = map[string]bool{"session_list": true, "audit_query": true}

// listsAcrossNodes says whether a JSON-RPC message (or every call of a batch) calls a tool of
// mcpListTools.
func listsAcrossNodes(buf []byte) bool {
	type msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	var msgs []msg
	if len(buf) > 0 && buf[0] == '[' {
		_ = json.Unmarshal(buf, &msgs)
	} else {
		var m msg
		if json.Unmarshal(buf, &m) == nil {
			msgs = []msg{m}
		}
	}
	calls := 0
	for _, m := range msgs {
		if m.Method != "tools/call" {
			continue
		}
		if !mcpListTools[m.Params.Name] {
			return false
		}
		calls++
	}
	return calls > 0
}

// mcpSession is the session id a JSON-RPC message (or the first of a batch that names one)
// passes to a tool, "" when none names a cluster session.
func mcpSession(b *body) string {
	if !b.replayable() || len(b.buf) == 0 {
		return ""
	}
	type msg struct {
		Params struct {
			Arguments struct {
				SessionID string `json:"session_id"`
			} `json:"arguments"`
		} `json:"params"`
	}
	var msgs []msg
	if b.buf[0] == '[' {
		_ = json.Unmarshal(b.buf, &msgs)
	} else {
		var m msg
		if json.Unmarshal(b.buf, &m) == nil {
			msgs = []msg{m}
		}
	}
	for _, m := range msgs {
		if id := m.Params.Arguments.SessionID; id != "" {
			if _, ok := cluster.NodeOfSession(id); ok {
				return id
			}
		}
	}
	return ""
}

// mcpSessionHeader is the streamable HTTP transport's session header.
const mcpSessionHeader = "Mcp-Session-Id"

// hostedMCP forwards a hosted MCP server's endpoint (/mcp/servers/NAME), whose MCP sessions live
// on the node that opened them: the gateway hands the client "NODE.ID" as the session's id and
// sends every later request of it to NODE with ID. A session whose node is gone is not found,
// which tells an MCP client to initialize a new one.
func (g *Gateway) hostedMCP(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get(mcpSessionHeader)
	if sid == "" {
		b, err := readBody(r)
		if err != nil {
			fail(w, err)
			return
		}
		order, err := g.place(want{})
		if err != nil {
			fail(w, err)
			return
		}
		for i, n := range order {
			resp, notSent, err := g.send(r, n, r.URL.Path, b)
			if err == nil {
				prefixSession(resp, n.ID)
				relay(w, resp)
				return
			}
			if !notSent || i == 1 || !b.replayable() || i+1 == len(order) {
				fail(w, unreachable(n, err))
				return
			}
		}
		return
	}
	nodeID, inner, ok := strings.Cut(sid, ".")
	n := g.byID(nodeID)
	if !ok || n == nil || !n.healthy() {
		fail(w, sandbox.Errorf(sandbox.KindNotFound, "MCP session %q is not open on a node of this cluster", sid).
			WithHint("initialize a new session (POST without Mcp-Session-Id)"))
		return
	}
	r = r.Clone(r.Context())
	r.Header.Set(mcpSessionHeader, inner)
	resp, _, err := g.send(r, n, r.URL.Path, &body{stream: r.Body})
	if err != nil {
		fail(w, unreachable(n, err))
		return
	}
	prefixSession(resp, n.ID)
	relay(w, resp)
}

// prefixSession names the node in an answer's MCP session id.
func prefixSession(resp *http.Response, node string) {
	if id := resp.Header.Get(mcpSessionHeader); id != "" {
		resp.Header.Set(mcpSessionHeader, node+"."+id)
	}
}
