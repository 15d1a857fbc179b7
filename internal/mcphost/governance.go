package mcphost

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/internal/dlp"
	"github.com/agentbox-dev/agentbox/internal/egress"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Egress is the daemon's egress gateway as the MCP gateway uses it: the profiles whose mcp
// sections and intents govern calls (tool lists, prompt_scan), the intent opened for a hosted
// server's own traffic while a call runs, and the monitor violations feed. *egress.Gateway is
// one.
type Egress interface {
	Profile(name string) (*egress.Profile, error)
	SetIntent(session, profile, name string, ttl time.Duration) (time.Time, error)
	ClearIntent(session string)
	Violation(sb egress.Sandbox, ev egress.Event, source string, endable bool) error
}

// SessionPolicy is what the MCP gateway needs of a session a call names: its egress profile
// ("" without network) and its current intent ("" none).
type SessionPolicy struct {
	Profile string
	Intent  string
}

// The keys by which a call names its intent and its session: in the call's _meta, or as HTTP
// headers of the request that carries it (for a client that can set headers and not _meta); the
// _meta wins.
const (
	MetaIntent    = "agentbox/intent"
	MetaSession   = "agentbox/session"
	HeaderIntent  = "X-Agentbox-Intent"
	HeaderSession = "X-Agentbox-Session"
	// MetaFlagged marks, in a tool's or a result's _meta, what the prompt scanner flagged.
	MetaFlagged = "agentbox/flagged"
)

// CallMeta is what a call says of itself besides its tool and arguments.
type CallMeta struct {
	Intent  string
	Session string
}

type callMetaKey struct{}

// WithCall puts what a call names (its _meta, and the headers of the HTTP request that carries
// it, either may be nil) in ctx for Call. The front doors that forward calls (Handler, and the
// daemon's /mcp for NAME__tool) call it.
func WithCall(ctx context.Context, meta mcp.Meta, header http.Header) context.Context {
	var cm CallMeta
	if header != nil {
		cm.Intent, cm.Session = strings.TrimSpace(header.Get(HeaderIntent)), strings.TrimSpace(header.Get(HeaderSession))
	}
	if v, ok := meta[MetaIntent].(string); ok && v != "" {
		cm.Intent = v
	}
	if v, ok := meta[MetaSession].(string); ok && v != "" {
		cm.Session = v
	}
	if cm == (CallMeta{}) {
		return ctx
	}
	return context.WithValue(ctx, callMetaKey{}, cm)
}

func callOf(ctx context.Context) CallMeta {
	cm, _ := ctx.Value(callMetaKey{}).(CallMeta)
	return cm
}

// callPolicy is what governs one call, resolved from the server, the call and its session.
type callPolicy struct {
	// intent is the intent in force: the call's, else its session's.
	intent  string
	session string
	// profiles are those whose lists apply: the server's (default when it has none, for its
	// governance only: it still has no network) and the calling session's.
	profiles []*egress.Profile
	// netIntent is opened for the server's own traffic during the call (a hosted server's, or the
	// call itself to a remote one): the intent, when the profile of that traffic has it.
	netIntent string
	// subject is who violations count against: the calling session (which an alert may end),
	// else the server ("mcp:NAME", never ended).
	subject egress.Sandbox
	endable bool
	// blockPrompts: some profile says mcp.prompt_scan: block.
	blockPrompts bool
}

// netProfile is the egress profile of a server's own traffic: a hosted server's (none: no
// network), or the one a remote server is reached under.
func netProfile(s Server) string {
	if s.Remote() {
		return s.RemoteProfile()
	}
	return s.Profile
}

// egressSession is the name the egress gateway knows a hosted server's sandbox by.
func egressSession(name string) string { return "mcp:" + name }

// policy resolves a call's policy. An intent the call names that no profile of it has, or a
// session that is not the caller's, is an error the caller reads.
func (m *Manager) policy(ctx context.Context, s Server) (callPolicy, error) {
	cm := callOf(ctx)
	pol := callPolicy{intent: cm.Intent, session: cm.Session, subject: egress.Sandbox{Session: egressSession(s.Name), Profile: s.Profile}}
	eg := m.opts.Egress
	if eg == nil {
		if cm != (CallMeta{}) {
			return pol, sandbox.Errorf(sandbox.KindInvalidRequest, "this daemon has no egress gateway, so a call cannot name an intent or a session")
		}
		return pol, nil
	}
	serverProfile := netProfile(s)
	if serverProfile == "" {
		serverProfile = sandbox.DefaultEgressProfile
	}
	pol.subject.Profile = serverProfile
	sp, err := eg.Profile(serverProfile)
	if err != nil {
		return pol, sandbox.Errorf(sandbox.KindInvalidRequest, "hosted MCP server %s: %v", s.Name, err).WithHint("register it again with an existing --profile")
	}
	pol.profiles = append(pol.profiles, sp)
	if cm.Session != "" {
		if m.opts.Sessions == nil {
			return pol, sandbox.Errorf(sandbox.KindInvalidRequest, "this gateway cannot look sessions up, so a call cannot name one")
		}
		sess, err := m.opts.Sessions(ctx, cm.Session)
		if err != nil {
			return pol, err
		}
		prof := sess.Profile
		if prof == "" {
			prof = sandbox.DefaultEgressProfile
		}
		if prof != sp.Name {
			p, err := eg.Profile(prof)
			if err != nil {
				return pol, sandbox.Errorf(sandbox.KindInvalidRequest, "session %s: %v", cm.Session, err)
			}
			pol.profiles = append(pol.profiles, p)
		}
		pol.subject, pol.endable = egress.Sandbox{Session: cm.Session, Profile: prof}, true
		if pol.intent == "" {
			pol.intent = sess.Intent
		}
	}
	if cm.Intent != "" && !slices.ContainsFunc(pol.profiles, func(p *egress.Profile) bool { _, ok := p.Intents[cm.Intent]; return ok }) {
		var names []string
		for _, p := range pol.profiles {
			names = append(names, p.Name)
		}
		return pol, sandbox.Errorf(sandbox.KindInvalidRequest, "the call names the intent %q, which egress profile %s does not have", cm.Intent, strings.Join(names, " nor "))
	}
	if _, ok := sp.Intents[pol.intent]; ok && netProfile(s) != "" {
		pol.netIntent = pol.intent
	}
	for _, p := range pol.profiles {
		pol.blockPrompts = pol.blockPrompts || p.BlocksPrompts()
	}
	return pol, nil
}

// decideTool combines the server's lists and the profiles' (with the intent's): the first deny
// refuses (the server's own lists first), then every allow list that is set must admit the tool.
// It returns the refusal's words, naming the list, and whether it is enforced (a profile in warn
// mode records it only).
func (pol callPolicy) decideTool(s Server, tool string) (reason string, enforced bool) {
	if slices.Contains(s.Deny, tool) {
		return fmt.Sprintf("denied: the tool %q of hosted MCP server %s is named by the server's deny list (agentbox mcp add --deny)", tool, s.Name), true
	}
	var warn string
	for _, p := range pol.profiles {
		d := p.DecideTool(pol.intent, s.Name, tool)
		if d.Allowed {
			continue
		}
		if d.Enforced {
			return d.Reason(s.Name, tool), true
		}
		if warn == "" {
			warn = d.Reason(s.Name, tool)
		}
	}
	if len(s.Allow) > 0 && !slices.Contains(s.Allow, tool) {
		return fmt.Sprintf("denied: the tool %q of hosted MCP server %s is not in the server's allow list (agentbox mcp add --allow)", tool, s.Name), true
	}
	return warn, false
}

// violation feeds a refusal to the egress monitor, against the call's subject.
func (m *Manager) violation(pol callPolicy, server, tool, decision, reason string) {
	if m.opts.Egress == nil || pol.subject.Profile == "" {
		return
	}
	ev := egress.Event{Intent: pol.intent, Method: "tools/call", URL: "mcp://" + server + "/" + tool, Decision: decision, Reason: reason}
	if err := m.opts.Egress.Violation(pol.subject, ev, "mcp", pol.endable); err != nil {
		m.logf("a hosted MCP violation not counted: %v", err)
	}
}

// policyOf is the policy of a request to server name that is not a tool call (a forwarded
// one); the zero policy (the defaults) when it cannot be resolved, which the request then meets.
func (m *Manager) policyOf(ctx context.Context, name string) callPolicy {
	if s, ok := m.Get(name); ok {
		if pol, err := m.policy(ctx, s); err == nil {
			return pol
		}
	}
	return callPolicy{}
}

// violationOf is violation for a request whose policy was not resolved yet (a forwarded one).
func (m *Manager) violationOf(ctx context.Context, name, what, decision, reason string) {
	if s, ok := m.Get(name); ok && m.opts.Egress != nil {
		if pol, err := m.policy(ctx, s); err == nil {
			m.violation(pol, name, what, decision, reason)
		}
	}
}

// scanArgs is DLP of what a caller sends a server (a call's arguments, a resource's URI, a
// prompt's arguments) under the dlp settings of each profile of the call in turn (the defaults
// without a gateway): v is the strongest action an enforcing profile takes, with its reason and
// every finding; out is what the server gets (redacted where a profile redacts); warned says what
// a profile in warn mode would have done. A disabled profile scans nothing.
func (m *Manager) scanArgs(pol callPolicy, where string, b []byte) (v dlp.Verdict, out []byte, warned string) {
	v.Action, out = dlp.ActionAllow, b
	if len(pol.profiles) == 0 {
		v, red := m.args.ScanContent(where, "application/json", b)
		if v.Action == dlp.ActionRedact && red != nil {
			out = red
		}
		return v, out, ""
	}
	rank := map[dlp.Action]int{dlp.ActionLog: 1, dlp.ActionRedact: 2, dlp.ActionBlock: 3}
	for _, p := range pol.profiles {
		if p.Mode == egress.ModeDisabled {
			continue
		}
		sc, err := m.scannerOf(p)
		if err != nil {
			return dlp.Verdict{Action: dlp.ActionBlock, Reason: fmt.Sprintf("blocked: the arguments could not be scanned under egress profile %s: %v", p.Name, err)}, nil, ""
		}
		pv, red := sc.ScanContent(where, "application/json", out)
		v.Findings = append(v.Findings, pv.Findings...)
		if p.Mode != egress.ModeEnforce {
			if pv.Action == dlp.ActionBlock || pv.Action == dlp.ActionRedact {
				warned = fmt.Sprintf("warned (egress profile %s): %s", p.Name, pv.Reason)
			}
			continue
		}
		if rank[pv.Action] > rank[v.Action] {
			v.Action, v.Reason = pv.Action, pv.Reason
		}
		if pv.Action == dlp.ActionBlock {
			return v, nil, warned
		}
		if pv.Action == dlp.ActionRedact && red != nil {
			out = red
		}
	}
	return v, out, warned
}

// scannerOf is the DLP scanner of a profile's settings, built once per loaded profile (a reload
// makes new profiles, and new scanners; the cache is emptied when it grows past what reloads
// leave behind).
func (m *Manager) scannerOf(p *egress.Profile) (*dlp.Scanner, error) {
	m.dlpMu.Lock()
	defer m.dlpMu.Unlock()
	if sc, ok := m.scanners[p]; ok {
		return sc, nil
	}
	sc, err := dlp.New(p.DLPConfig())
	if err != nil {
		return nil, err
	}
	if len(m.scanners) >= 64 {
		clear(m.scanners)
	}
	m.scanners[p] = sc
	return sc, nil
}

// intentLease opens an intent for a hosted server's own traffic while calls under it run. The
// gateway keeps one intent per sandbox and a server's traffic cannot be told apart by call, so
// calls under different intents (or none) take turns: a call waits until the calls under another
// intent have ended, and the intent is cleared when the last call under it ends.
type intentLease struct {
	mu   sync.Mutex
	name string
	n    int
	free chan struct{} // closed when n drops to 0
}

// acquire waits for the server's traffic to be under want, opening it at the gateway.
func (m *Manager) acquire(ctx context.Context, l *intentLease, s Server, want string) error {
	for {
		l.mu.Lock()
		if l.n == 0 || l.name == want {
			if l.n == 0 {
				if want != "" {
					if _, err := m.opts.Egress.SetIntent(egressSession(s.Name), netProfile(s), want, 0); err != nil {
						l.mu.Unlock()
						return sandbox.Errorf(sandbox.KindInvalidRequest, "the intent %s could not be opened for hosted MCP server %s: %v", want, s.Name, err)
					}
				}
				l.name, l.free = want, make(chan struct{})
			}
			l.n++
			l.mu.Unlock()
			return nil
		}
		free := l.free
		l.mu.Unlock()
		select {
		case <-free:
		case <-ctx.Done():
			return sandbox.Errorf(sandbox.KindTimeout, "hosted MCP server %s was busy with calls under another intent (%v)", s.Name, ctx.Err())
		}
	}
}

func (m *Manager) release(l *intentLease, s Server) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n--; l.n == 0 {
		if l.name != "" {
			m.opts.Egress.ClearIntent(egressSession(s.Name))
		}
		l.name = ""
		close(l.free)
	}
}

// flaggedMeta returns meta with the scanner's rules under MetaFlagged.
func flaggedMeta(meta mcp.Meta, rules []string) mcp.Meta {
	out := mcp.Meta{}
	for k, v := range meta {
		out[k] = v
	}
	out[MetaFlagged] = rules
	return out
}

// listed is a server's tools as a client sees them: a tool whose description the scanner
// flagged carries the rules in its _meta, or is left out when the server's profile blocks.
func (m *Manager) listed(ctx context.Context, s Server, h *host) []*mcp.Tool {
	block := false
	if pol, err := m.policy(ctx, s); err == nil {
		block = pol.blockPrompts
	}
	out := make([]*mcp.Tool, 0, len(h.tools))
	for _, t := range h.tools {
		rules, flagged := h.pin.Flagged[t.Name]
		switch {
		case !flagged:
			out = append(out, t)
		case !block:
			c := *t
			c.Meta = flaggedMeta(t.Meta, rules)
			out = append(out, &c)
		}
	}
	return out
}
