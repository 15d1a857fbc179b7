package mcphost

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/dlp"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// /mcp/servers/NAME keeps sessions (streamable HTTP with an Mcp-Session-Id, the GET stream,
// DELETE to end one), each with an MCP server of its own, so that what needs a stream to the
// client can be carried: a hosted server's resource updates. Sessions are bounded (Options.
// MaxSessions in all, MaxSessionsPerCaller per key, SessionIdle without a request) and bound to
// the key that opened them: a session id presented with another key, or for another server, is
// not found, so tenants never share one.
//
// The gateway holds one client session to each hosted server, shared by all its clients; a
// subscription is therefore the gateway's: the first gateway session to subscribe to a URI
// subscribes upstream, the last to leave unsubscribes, and the server's
// notifications/resources/updated go, redacted by DLP, only to the sessions subscribed to that
// URI (each through its server's ResourceUpdated).

const sessionHeader = "Mcp-Session-Id"

// gwSession is one session of /mcp/servers/NAME.
type gwSession struct {
	id, server, owner string
	srv               *mcp.Server
	pending           bool // its first request is being served
	ended             bool // ended by DELETE
}

// live says whether the session's server still has its client session (not ended by DELETE,
// idleness or a failed initialize).
func (g *gwSession) live() bool {
	for range g.srv.Sessions() {
		return true
	}
	return false
}

// sessionTable is the handler's sessions and the gateway's subscriptions.
type sessionTable struct {
	mu   sync.Mutex
	byID map[string]*gwSession
	// subs: server → URI → the sessions subscribed to it.
	subs map[string]map[string]map[*gwSession]bool
}

func (t *sessionTable) get(id string) *gwSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id]
}

// pruneLocked forgets ended sessions and returns the subscriptions they leave with nobody
// (server, URI) to end upstream.
func (t *sessionTable) pruneLocked() (orphans [][2]string) {
	for id, g := range t.byID {
		if !g.ended && (g.pending || g.live()) {
			continue
		}
		delete(t.byID, id)
		for server, uris := range t.subs {
			for uri, set := range uris {
				if set[g] {
					delete(set, g)
					if len(set) == 0 {
						delete(uris, uri)
						orphans = append(orphans, [2]string{server, uri})
					}
				}
			}
		}
	}
	return orphans
}

// forget ends the session id (DELETE): it no longer counts, and what only it followed is
// unsubscribed upstream.
func (m *Manager) forget(ctx context.Context, id string) {
	m.gw.mu.Lock()
	if g := m.gw.byID[id]; g != nil {
		g.ended = true
	}
	orphans := m.gw.pruneLocked()
	m.gw.mu.Unlock()
	for _, o := range orphans {
		m.unsubscribeUpstream(ctx, o[0], o[1])
	}
}

// prune forgets ended sessions and unsubscribes upstream from what nobody follows any more.
func (m *Manager) prune(ctx context.Context) {
	m.gw.mu.Lock()
	orphans := m.gw.pruneLocked()
	m.gw.mu.Unlock()
	for _, o := range orphans {
		m.unsubscribeUpstream(ctx, o[0], o[1])
	}
}

// admit registers a new session for owner, or refuses it past the bounds.
func (m *Manager) admit(ctx context.Context, server, owner string) (*gwSession, error) {
	m.gw.mu.Lock()
	orphans := m.gw.pruneLocked()
	n, mine := 0, 0
	for _, g := range m.gw.byID {
		n++
		if g.owner == owner {
			mine++
		}
	}
	var g *gwSession
	var err error
	switch {
	case n >= m.opts.MaxSessions:
		err = sandbox.Errorf(sandbox.KindConflict, "the gateway holds %d MCP sessions, its limit (max_sessions %d); no new session was opened", n, m.opts.MaxSessions)
	case mine >= m.opts.MaxSessionsPerCaller:
		err = sandbox.Errorf(sandbox.KindConflict, "this API key holds %d MCP sessions on /mcp/servers, its limit (%d per key); no new session was opened", mine, m.opts.MaxSessionsPerCaller)
	default:
		g = &gwSession{id: rand.Text(), server: server, owner: owner, pending: true}
		m.gw.byID[g.id] = g
	}
	m.gw.mu.Unlock()
	for _, o := range orphans {
		m.unsubscribeUpstream(ctx, o[0], o[1])
	}
	if err != nil {
		return nil, err.(*sandbox.Error).WithHint("end sessions you no longer use (DELETE /mcp/servers/%s with their Mcp-Session-Id header), or wait: a session ends after %s without a request", server, m.opts.SessionIdle)
	}
	return g, nil
}

// settle ends the first request of g: a session that did not open (not an initialize, or one
// that failed) is forgotten.
func (m *Manager) settle(g *gwSession) {
	m.gw.mu.Lock()
	defer m.gw.mu.Unlock()
	g.pending = false
	if g.srv == nil || !g.live() {
		delete(m.gw.byID, g.id)
	}
}

// owner is who a request is: the key that opened a session must be the key that uses it.
func (m *Manager) owner(ctx context.Context) string {
	if m.opts.Owner == nil {
		return ""
	}
	return m.opts.Owner(ctx)
}

// subscribe follows uri of server for g, subscribing upstream when g is the first.
func (m *Manager) subscribe(ctx context.Context, server string, g *gwSession, uri string) error {
	if err := m.checkURI(ctx, server, "resources/subscribe", uri); err != nil {
		return protocolError(err)
	}
	_, cs, err := m.session(ctx, server)
	if err != nil {
		return protocolError(err)
	}
	m.gw.mu.Lock()
	defer m.gw.mu.Unlock()
	uris := m.gw.subs[server]
	if uris == nil {
		uris = map[string]map[*gwSession]bool{}
		m.gw.subs[server] = uris
	}
	if len(uris[uri]) == 0 {
		// Held under the table's lock, so that a concurrent last unsubscribe cannot cross it.
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			return protocolError(err)
		}
		uris[uri] = map[*gwSession]bool{}
	}
	uris[uri][g] = true
	m.record(ctx, Record{Kind: "mcp.read", Server: server, Tool: uri, Decision: "allow", Reason: "resources/subscribe"})
	return nil
}

// unsubscribe stops following uri for g, unsubscribing upstream when g was the last.
func (m *Manager) unsubscribe(ctx context.Context, server string, g *gwSession, uri string) error {
	m.gw.mu.Lock()
	set := m.gw.subs[server][uri]
	last := set[g] && len(set) == 1
	delete(set, g)
	if len(set) == 0 && m.gw.subs[server] != nil {
		delete(m.gw.subs[server], uri)
	}
	m.gw.mu.Unlock()
	if last {
		m.unsubscribeUpstream(ctx, server, uri)
	}
	return nil
}

func (m *Manager) unsubscribeUpstream(ctx context.Context, server, uri string) {
	if _, cs := m.upstream(server); cs != nil {
		if err := cs.Unsubscribe(context.WithoutCancel(ctx), &mcp.UnsubscribeParams{URI: uri}); err != nil {
			m.logf("hosted MCP server %s: resources/unsubscribe %s: %v", server, uri, err)
		}
	}
}

// subscribed are the URIs of server some session follows (subscribed again when the server
// starts again).
func (m *Manager) subscribed(server string) []string {
	m.gw.mu.Lock()
	defer m.gw.mu.Unlock()
	var out []string
	for uri := range m.gw.subs[server] {
		out = append(out, uri)
	}
	return out
}

// relayUpdated sends a hosted server's resource update, redacted, to the sessions following it.
func (m *Manager) relayUpdated(ctx context.Context, server string, p *mcp.ResourceUpdatedNotificationParams) {
	if p == nil {
		return
	}
	b, _ := json.Marshal(p)
	red, v := m.results.RedactText("notification", b)
	out := new(mcp.ResourceUpdatedNotificationParams)
	if err := json.Unmarshal(red, out); err != nil || out.URI != p.URI {
		// A URI that would change is another resource: the update is withheld, and recorded.
		m.record(ctx, Record{Kind: "mcp.list", Server: server, Tool: "notifications/resources/updated", Decision: "block",
			Findings: findings(v, "notification"), Reason: "a resource update was withheld: its URI holds what DLP redacts"})
		return
	}
	if v.Action == dlp.ActionRedact {
		m.record(ctx, Record{Kind: "mcp.list", Server: server, Tool: "notifications/resources/updated", Decision: "redact", Findings: findings(v, "notification"), ResultExcerpt: excerpt(red, 512)})
	}
	m.gw.mu.Lock()
	var to []*gwSession
	for g := range m.gw.subs[server][p.URI] {
		to = append(to, g)
	}
	m.gw.mu.Unlock()
	for _, g := range to {
		_ = g.srv.ResourceUpdated(ctx, out)
	}
}

// checkURI is DLP on a URI the caller sends (as for resources/read): whatever DLP would act on
// stops it before the server sees it.
func (m *Manager) checkURI(ctx context.Context, server, method, uri string) error {
	b, _ := json.Marshal(map[string]string{"uri": uri})
	v, _, _ := m.scanArgs(m.policyOf(ctx, server), "arguments", b)
	if v.Action != dlp.ActionBlock && v.Action != dlp.ActionRedact {
		return nil
	}
	reason := "blocked before reaching the server: " + strings.TrimPrefix(v.Reason, "blocked: ")
	red, _ := m.results.RedactText("arguments", b)
	m.record(ctx, Record{Kind: "mcp.read", Server: server, Tool: method, Decision: "block", Reason: reason,
		ArgsSHA256: digest(b), ArgsExcerpt: excerpt(red, 512), Findings: findings(v, "arguments")})
	m.violationOf(ctx, server, method, "block", reason)
	return sandbox.Errorf(sandbox.KindPolicyViolation, "%s", reason)
}

// methodOf is the method of a JSON-RPC message ("" for a batch or what is not JSON).
func methodOf(body []byte) string {
	var msg struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(body, &msg)
	return msg.Method
}

// writeError answers err as the API does (its status, code, message and hint).
func writeError(w http.ResponseWriter, err error) {
	status, body := apiwire.ErrorResponse(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// rebinding says whether r came to a loopback address naming another host (the SDK's DNS
// rebinding guard refuses it; checked first here so that such a request opens nothing).
func rebinding(r *http.Request) bool {
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || la == nil {
		return false
	}
	return loopback(la.String()) && !loopback(r.Host)
}

func loopback(hostport string) bool {
	h := hostport
	if x, _, err := net.SplitHostPort(hostport); err == nil {
		h = x
	}
	h = strings.Trim(h, "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// upstream is hosted server name and its client session to the server, when it has one (nil,
// nil when the server is not hosted; h, nil when it has not started).
func (m *Manager) upstream(name string) (*host, *mcp.ClientSession) {
	m.mu.Lock()
	h := m.hosts[name]
	m.mu.Unlock()
	if h == nil {
		return nil, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h, h.session
}
