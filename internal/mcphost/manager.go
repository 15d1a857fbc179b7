package mcphost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/internal/dlp"
	"github.com/agentbox-dev/agentbox/internal/egress"
	"github.com/agentbox-dev/agentbox/internal/promptscan"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Process is a running hosted server: its stdout to read, its stdin to write.
type Process interface {
	io.Reader
	io.Writer
	Done() <-chan struct{}
	Err() error
	Close() error
}

// SpawnFunc starts a server's process in a sandbox of its own and returns it with the hash of
// the image it runs. The daemon's wraps heavy.Runtime.Spawn.
type SpawnFunc func(ctx context.Context, s Server) (Process, string, error)

// Options configure a Manager.
type Options struct {
	// Dir holds servers.json, pins/ and audit.jsonl (DATA_DIR/mcp). Required.
	Dir string
	// Spawn starts servers. Required to call them (listing and registering work without).
	Spawn SpawnFunc
	// Remote is the HTTP client a remote server (Server.URL) is reached with: the daemon's goes
	// through the egress gateway under the server's profile. Without it remote servers cannot be
	// called.
	Remote func(ctx context.Context, s Server) (*http.Client, error)
	// Idle is how long a server is kept warm without calls. Default 10m.
	Idle time.Duration
	// Audit receives every record besides the file (the daemon's signed audit log); optional. ctx
	// is the call's, carrying who asked.
	Audit func(ctx context.Context, r Record)
	// Egress is the egress gateway (governance.go): the profiles' MCP tool lists and
	// prompt_scan, their intents, the intent opened for a server's traffic during a call, and the
	// monitor violations feed. Nil: only the servers' own lists govern, descriptions and results
	// are flagged, and calls cannot name intents or sessions.
	Egress Egress
	// Sessions looks up a session a call names, as the call's caller sees it (another tenant's is
	// not found). Nil: calls cannot name sessions.
	Sessions func(ctx context.Context, id string) (SessionPolicy, error)
	// Owner names who a request to /mcp/servers/NAME is (the daemon: the tenant and the key):
	// a session is used only by the owner that opened it. Nil: every request is the same owner.
	Owner func(ctx context.Context) string
	// MaxSessions bounds the sessions of /mcp/servers/NAME in all (default 1024) and
	// MaxSessionsPerCaller those of one owner (default 64); past either, a new session is refused
	// (conflict). SessionIdle ends a session without requests (default 30m).
	MaxSessions, MaxSessionsPerCaller int
	SessionIdle                       time.Duration
	// Logger is where the gateway says what it could not record elsewhere. Default slog.Default.
	Logger *slog.Logger
}

// Manager keeps the registered servers and their running processes.
type Manager struct {
	opts    Options
	args    *dlp.Scanner // arguments without a gateway: the default actions (block cards and keys)
	results *dlp.Scanner // results and excerpts: everything redacted
	audit   fileAudit

	mu      sync.Mutex
	servers map[string]Server
	// stamp is servers.json as last read or written (refresh); loaded says it was read once.
	stamp      fileStamp
	loaded     bool
	refreshErr string
	hosts      map[string]*host
	// scanners are the DLP scanners of the profiles' dlp settings, for arguments (scanArgs).
	dlpMu    sync.Mutex
	scanners map[*egress.Profile]*dlp.Scanner
	closed   bool
	stop     chan struct{}
	// gw is /mcp/servers/NAME's sessions and subscriptions (sessions.go); bare is a server with
	// no session, asked only for its protocol versions.
	gw   sessionTable
	bare *mcp.Server
}

// host is a server's running process and client session.
type host struct {
	mu        sync.Mutex // held while starting
	proc      Process
	session   *mcp.ClientSession
	tools     []*mcp.Tool
	pin       Pin
	refused   []string // what changed from the recorded pin; non-empty: calls are refused
	lastUsed  time.Time
	imageHash string
	lease     intentLease // the intent of the server's traffic during calls
	// built is the MCP server of requests in no session, for builtKey (handler.go).
	built    *mcp.Server
	builtKey serverKey
}

// Open loads the registry under opts.Dir.
func Open(opts Options) (*Manager, error) {
	if opts.Dir == "" {
		return nil, errors.New("mcphost: no directory")
	}
	if opts.Idle <= 0 {
		opts.Idle = 10 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 1024
	}
	if opts.MaxSessionsPerCaller <= 0 {
		opts.MaxSessionsPerCaller = 64
	}
	if opts.SessionIdle <= 0 {
		opts.SessionIdle = 30 * time.Minute
	}
	args, err := dlp.New(dlp.Config{})
	if err != nil {
		return nil, err
	}
	red := dlp.Config{Actions: map[string]dlp.Action{}, Oversize: dlp.OversizeScanPrefix}
	for det := range dlp.DefaultActions() {
		red.Actions[det] = dlp.ActionRedact
	}
	results, err := dlp.New(red)
	if err != nil {
		return nil, err
	}
	m := &Manager{opts: opts, args: args, results: results, servers: map[string]Server{}, hosts: map[string]*host{}, scanners: map[*egress.Profile]*dlp.Scanner{}, stop: make(chan struct{})}
	m.gw = sessionTable{byID: map[string]*gwSession{}, subs: map[string]map[string]map[*gwSession]bool{}}
	m.bare = mcp.NewServer(&mcp.Implementation{Name: "agentbox", Version: "1"}, nil)
	m.audit.path = filepath.Join(opts.Dir, "audit.jsonl")
	if err := m.refresh(); err != nil {
		return nil, err
	}
	go m.reapIdle()
	return m, nil
}

func (m *Manager) logf(format string, args ...any) {
	m.opts.Logger.Warn(fmt.Sprintf(format, args...))
}

// AuditFile is where the gateway's records are.
func (m *Manager) AuditFile() string { return m.audit.path }

func (m *Manager) record(ctx context.Context, r Record) {
	r.Time = time.Now().UTC()
	m.audit.write(r)
	if m.opts.Audit != nil {
		m.opts.Audit(ctx, r)
	}
}

// Add registers a server.
func (m *Manager) Add(s Server) error {
	if err := s.Validate(); err != nil {
		return sandbox.Errorf(sandbox.KindInvalidRequest, "%v", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.refresh(); err != nil {
		return sandbox.Errorf(sandbox.KindInternal, "the hosted MCP registry cannot be read, so it is not written: %v", err)
	}
	if _, ok := m.servers[s.Name]; ok {
		return sandbox.Errorf(sandbox.KindConflict, "a hosted MCP server named %q exists", s.Name).WithHint("remove it first: agentbox mcp remove %s", s.Name)
	}
	if s.Added.IsZero() {
		s.Added = time.Now().UTC().Truncate(time.Second)
	}
	m.servers[s.Name] = s
	return m.save()
}

// Remove unregisters a server and stops it. Its pin is kept (a server added again under the
// name is held to it).
func (m *Manager) Remove(name string) error {
	m.mu.Lock()
	if err := m.refresh(); err != nil {
		m.mu.Unlock()
		return sandbox.Errorf(sandbox.KindInternal, "the hosted MCP registry cannot be read, so it is not written: %v", err)
	}
	if _, ok := m.servers[name]; !ok {
		m.mu.Unlock()
		return notFound(name)
	}
	delete(m.servers, name)
	h := m.hosts[name]
	delete(m.hosts, name)
	err := m.save()
	m.mu.Unlock()
	if h != nil {
		h.stop()
	}
	return err
}

// List returns the registered servers by name.
func (m *Manager) List() []Server {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fresh()
	out := make([]Server, 0, len(m.servers))
	for _, s := range m.servers {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names returns the registered servers' names, sorted.
func (m *Manager) Names() []string {
	list := m.List()
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s.Name
	}
	return out
}

// Get returns one server.
func (m *Manager) Get(name string) (Server, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fresh()
	s, ok := m.servers[name]
	return s, ok
}

// Running says whether a server's process is up.
func (m *Manager) Running(name string) bool {
	m.mu.Lock()
	h := m.hosts[name]
	m.mu.Unlock()
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.alive()
}

// alive says whether the host's server is up: a process running (a hosted server) or a session
// open (a remote one, which has no process). h.mu held.
func (h *host) alive() bool {
	return h.session != nil && (h.proc == nil || h.proc.Err() == nil)
}

func notFound(name string) error {
	return sandbox.Errorf(sandbox.KindNotFound, "no hosted MCP server is named %q", name).WithHint("list them: agentbox mcp list")
}

// Close stops every server.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.stop)
	hosts := m.hosts
	m.hosts = map[string]*host{}
	m.mu.Unlock()
	for _, h := range hosts {
		h.stop()
	}
	m.audit.close()
	return nil
}

func (h *host) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopLocked()
}

func (h *host) stopLocked() {
	if h.session != nil {
		_ = h.session.Close()
		h.session = nil
	}
	if h.proc != nil {
		_ = h.proc.Close()
		h.proc = nil
	}
}

func (m *Manager) reapIdle() {
	tick := time.NewTicker(m.opts.Idle / 4)
	defer tick.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
		m.prune(context.Background())
		m.mu.Lock()
		hosts := make(map[string]*host, len(m.hosts))
		for name, h := range m.hosts {
			hosts[name] = h
		}
		m.mu.Unlock()
		for name, h := range hosts {
			// A server some session follows a resource of is kept: its updates come unasked.
			followed := len(m.subscribed(name)) > 0
			h.mu.Lock()
			if h.session != nil && !followed && time.Since(h.lastUsed) > m.opts.Idle {
				h.stopLocked()
			}
			h.mu.Unlock()
		}
	}
}

// hostOf returns a server's host, its process started (or started again) and its tools listed
// and checked against the pin.
func (m *Manager) hostOf(ctx context.Context, name string) (*host, Server, error) {
	m.mu.Lock()
	m.fresh()
	s, ok := m.servers[name]
	if !ok {
		m.mu.Unlock()
		return nil, s, notFound(name)
	}
	h := m.hosts[name]
	if h == nil {
		h = &host{}
		m.hosts[name] = h
	}
	m.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastUsed = time.Now()
	if h.alive() {
		return h, s, nil
	}
	h.stopLocked()
	if err := m.start(ctx, s, h); err != nil {
		return nil, s, err
	}
	return h, s, nil
}

// start starts the server's process, connects, lists its tools and checks them against the pin
// (recording the first). h.mu held.
func (m *Manager) start(ctx context.Context, s Server, h *host) error {
	var proc Process
	var imageHash string
	var cs *mcp.ClientSession
	name := s.Name
	copts := &mcp.ClientOptions{
		ResourceUpdatedHandler: func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			m.relayUpdated(ctx, name, req.Params)
		},
	}
	m.listChangedHandlers(name, copts)
	client := mcp.NewClient(&mcp.Implementation{Name: "agentbox", Version: "1"}, copts)
	closeAll := func() {
		if cs != nil {
			_ = cs.Close()
		}
		if proc != nil {
			_ = proc.Close()
		}
	}
	if s.Remote() {
		if m.opts.Remote == nil {
			return sandbox.Errorf(sandbox.KindRuntimeUnavailable, "remote MCP server %s is reached through the daemon's egress gateway, which is not here", s.Name).
				WithHint("call it through a daemon with its egress gateway on (agentbox serve); approve it over the API: POST /v1/mcp/servers/%s/approve", s.Name)
		}
		hc, err := m.opts.Remote(ctx, s)
		if err != nil {
			return err
		}
		// The pin of a remote server is bound to its URL, where a hosted one's is bound to its
		// image.
		imageHash = "url:" + s.URL
		cs, err = client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.URL, HTTPClient: hc, MaxRetries: -1}, nil)
		if err != nil {
			return remoteErr(s, "did not initialize", err)
		}
	} else {
		if m.opts.Spawn == nil {
			return sandbox.Errorf(sandbox.KindRuntimeUnavailable, "hosted MCP servers need the heavy (gVisor) runtime, which this daemon does not run")
		}
		var err error
		proc, imageHash, err = m.opts.Spawn(ctx, s)
		if err != nil {
			return err
		}
		cs, err = client.Connect(ctx, &mcp.IOTransport{Reader: io.NopCloser(proc), Writer: writeCloser{proc}}, nil)
		if err != nil {
			closeAll()
			return sandbox.Errorf(sandbox.KindRuntimeUnavailable, "hosted MCP server %s did not initialize: %v", s.Name, err)
		}
	}
	var tools []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			closeAll()
			if s.Remote() {
				return remoteErr(s, "tools/list", err)
			}
			return sandbox.Errorf(sandbox.KindRuntimeUnavailable, "hosted MCP server %s: tools/list: %v", s.Name, err)
		}
		tools = append(tools, t)
	}
	h.proc, h.session, h.tools, h.imageHash = proc, cs, tools, imageHash
	// The gateway's subscriptions outlive a server started again.
	for _, uri := range m.subscribed(s.Name) {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			m.logf("hosted MCP server %s: resources/subscribe %s again: %v", s.Name, uri, err)
		}
	}
	cur := pinOf(s.Name, imageHash, tools)
	old, ok, err := m.readPin(s.Name)
	if err != nil {
		return err
	}
	h.refused = nil
	switch {
	case !ok:
		cur.Pinned = time.Now().UTC().Truncate(time.Second)
		if err := writeJSON(m.pinFile(s.Name), cur); err != nil {
			return err
		}
		h.pin = cur
		m.record(ctx, Record{Kind: "mcp.pin", Server: s.Name, Decision: "allow", PinHash: cur.Hash, Flagged: flaggedList(cur), Reason: fmt.Sprintf("first tools/list pinned: %d tools, image %s", len(tools), short(imageHash))})
	case old.Hash != cur.Hash:
		h.pin = old
		h.refused = cur.diff(old)
		m.record(ctx, Record{Kind: "mcp.refused", Server: s.Name, Decision: "refuse", PinHash: cur.Hash, Changes: h.refused, Flagged: flaggedList(cur),
			Reason: "tool definitions differ from the pinned ones"})
	default:
		h.pin = old
	}
	return nil
}

func flaggedList(p Pin) []string {
	var out []string
	for t, rules := range p.Flagged {
		out = append(out, t+": "+strings.Join(rules, ","))
	}
	sort.Strings(out)
	return out
}

type writeCloser struct{ io.Writer }

func (writeCloser) Close() error { return nil }

// Approve pins the server's current tool definitions (after a change was refused), as a person
// decided; the approval is an audit record.
func (m *Manager) Approve(ctx context.Context, name string) (Pin, error) {
	h, s, err := m.hostOf(ctx, name)
	if err != nil {
		return Pin{}, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	cur := pinOf(s.Name, h.imageHash, h.tools)
	cur.Pinned, cur.Approved = time.Now().UTC().Truncate(time.Second), true
	changes := cur.diff(h.pin)
	if err := writeJSON(m.pinFile(name), cur); err != nil {
		return Pin{}, err
	}
	h.pin, h.refused = cur, nil
	m.record(ctx, Record{Kind: "mcp.approve", Server: name, Decision: "allow", PinHash: cur.Hash, Changes: changes, Flagged: flaggedList(cur),
		Reason: fmt.Sprintf("tool definitions approved: %d tools", len(h.tools))})
	return cur, nil
}

// Tools returns the server's tools as a client sees them (listed: flagged descriptions marked
// or, under a blocking profile, left out), refusing while their definitions differ from the pin.
func (m *Manager) Tools(ctx context.Context, name string) ([]*mcp.Tool, error) {
	h, s, err := m.hostOf(ctx, name)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.refused) > 0 {
		return nil, refusedErr(name, h.refused)
	}
	return m.listed(ctx, s, h), nil
}

func refusedErr(name string, changes []string) error {
	return sandbox.Errorf(sandbox.KindForbidden, "hosted MCP server %s: its tool definitions changed since they were pinned (%s); calls are refused until a person approves them", name, strings.Join(changes, "; ")).
		WithHint("review the server's tools, then: agentbox mcp approve %s", name)
}

// Call calls a tool of a hosted server, governed (package doc). What the call names (WithCall:
// an intent, a session) is read from ctx. A refusal is an error result (IsError) the model can
// read; err is for a failure of the gateway or of the server's sandbox, or a refusal of the call's
// own words (an intent no profile has, a session not the caller's, definitions not approved).
func (m *Manager) Call(ctx context.Context, name, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	start := time.Now()
	rec := Record{Kind: "mcp.call", Server: name, Tool: tool}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	rec.ArgsSHA256 = digest(args)
	red, _ := m.results.RedactText("arguments", args)
	rec.ArgsExcerpt = excerpt(red, 512)
	done := func(decision, reason string) {
		rec.Decision, rec.Reason = decision, reason
		rec.DurationMS = float64(time.Since(start).Microseconds()) / 1000
		m.record(ctx, rec)
	}
	var pol callPolicy
	// refuse answers a refusal as a tool error; a violation also counts towards the monitor's
	// alerts.
	refuse := func(decision, reason string, violation bool) (*mcp.CallToolResult, error) {
		done(decision, reason)
		if violation {
			m.violation(pol, name, tool, decision, reason)
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: reason}}}, nil
	}
	h, s, err := m.hostOf(ctx, name)
	if err != nil {
		done("error", err.Error())
		return nil, err
	}
	pol, err = m.policy(ctx, s)
	rec.Intent, rec.Session = pol.intent, pol.session
	if err != nil {
		done("deny", err.Error())
		return nil, err
	}
	h.mu.Lock()
	refused, cs, known := h.refused, h.session, slices.ContainsFunc(h.tools, func(t *mcp.Tool) bool { return t.Name == tool })
	descFlagged := h.pin.Flagged[tool]
	h.lastUsed = time.Now()
	h.mu.Unlock()
	if len(refused) > 0 {
		err := refusedErr(name, refused)
		done("refuse", err.Error())
		m.violation(pol, name, tool, "refuse", err.Error())
		return nil, err
	}
	if !known {
		return refuse("deny", fmt.Sprintf("hosted MCP server %s has no tool %q", name, tool), false)
	}
	reason, enforced := pol.decideTool(s, tool)
	switch {
	case reason != "" && enforced:
		return refuse("deny", reason, true)
	case reason != "":
		rec.Reason = "warned: " + reason // a profile in warn mode: recorded, not applied
	}
	if len(descFlagged) > 0 {
		rec.Flagged = append(rec.Flagged, prefixed("description:", descFlagged)...)
		if pol.blockPrompts {
			return refuse("block", fmt.Sprintf("blocked: the description of the tool %q of hosted MCP server %s holds what looks like hidden instructions to the model (%s), and the egress profile's mcp.prompt_scan is block",
				tool, name, strings.Join(descFlagged, ", ")), true)
		}
	}
	v, scanned, warned := m.scanArgs(pol, "arguments", args)
	rec.Findings = append(rec.Findings, findings(v, "arguments")...)
	if warned != "" {
		rec.Reason = strings.TrimPrefix(rec.Reason+"; "+warned, "; ")
	}
	if v.Action == dlp.ActionBlock {
		return refuse("block", "blocked before reaching the server: "+strings.TrimPrefix(v.Reason, "blocked: "), true)
	}
	args = scanned
	if m.opts.Egress != nil && netProfile(s) != "" {
		if err := m.acquire(ctx, &h.lease, s, pol.netIntent); err != nil {
			done("error", err.Error())
			return nil, err
		}
		defer m.release(&h.lease, s)
	}
	var params any = args
	sent := time.Now()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: params})
	rec.ServerMS = float64(time.Since(sent).Microseconds()) / 1000
	if err != nil {
		h.mu.Lock()
		var why error
		if h.proc != nil {
			why = h.proc.Err()
		}
		h.mu.Unlock()
		if m.ended(h, err) { // the next call starts it again
			var e error = sandbox.Errorf(sandbox.KindRuntimeUnavailable, "hosted MCP server %s ended during the call (%v); it is started again on the next call", name, firstErr(why, err))
			if s.Remote() {
				e = remoteErr(s, "ended the connection during the call", err)
			}
			done("error", e.Error())
			return nil, e
		}
		done("error", err.Error())
		return nil, err
	}
	out, _ := json.Marshal(res)
	rec.ResultSHA256 = digest(out)
	rv, rred := m.results.ScanContent("result", "application/json", out)
	rec.Findings = append(rec.Findings, findings(rv, "result")...)
	decision := "allow"
	if v.Action == dlp.ActionRedact {
		decision = "redact"
	}
	if rv.Action == dlp.ActionRedact && rred != nil {
		var r2 mcp.CallToolResult
		if err := json.Unmarshal(rred, &r2); err == nil {
			res, out, decision = &r2, rred, "redact"
		}
	} else if rv.Action == dlp.ActionBlock {
		return refuse("block", "the result was withheld: "+rv.Reason, false)
	}
	rec.ResultExcerpt = excerpt(out, 512)
	if pr := promptscan.ScanText(resultText(res)); pr.Flagged() {
		rules := pr.Rules()
		rec.Flagged = append(rec.Flagged, prefixed("result:", rules)...)
		if pol.blockPrompts {
			rec.ResultExcerpt = ""
			return refuse("block", fmt.Sprintf("blocked: the result of the tool %q of hosted MCP server %s was withheld: it holds what looks like instructions to the model (%s), and the egress profile's mcp.prompt_scan is block",
				tool, name, strings.Join(rules, ", ")), true)
		}
		res.Meta = flaggedMeta(res.Meta, rules)
	}
	if rec.Reason != "" && rv.Reason != "" {
		rec.Reason += "; " + rv.Reason
	} else if rv.Reason != "" {
		rec.Reason = rv.Reason
	}
	done(decision, rec.Reason)
	return res, nil
}

func prefixed(p string, rules []string) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = p + r
	}
	return out
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func findings(v dlp.Verdict, where string) []string {
	var out []string
	for _, f := range v.Findings {
		d := f.Detector
		if f.Rule != "" {
			d += ":" + f.Rule
		}
		out = append(out, d+"@"+where+" "+f.Field+" ("+string(f.Action)+")")
	}
	return out
}

func resultText(r *mcp.CallToolResult) []byte {
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
			b.WriteByte('\n')
		}
	}
	return []byte(b.String())
}
