package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/elazarl/goproxy"
)

// Sandbox is what the gateway knows of the sandbox a connection comes from.
type Sandbox struct {
	// Session is the session's ID, or the run's for a one-shot run: intents and violation
	// counters are kept by it.
	Session string
	// Profile names the egress profile.
	Profile string
}

// DLPResult is what the DLP stage found in a request.
type DLPResult struct {
	// Action is the strongest action of the findings: "" (nothing found), log, redact or block.
	Action string
	// Detectors are the detectors that matched, e.g. ["payment_card"].
	Detectors []string
	// Reason is written for the agent: what was found where, never the value itself.
	Reason string
	// Redacted is true when the request was rewritten with the matches replaced.
	Redacted bool
}

// Inspector is the DLP stage. When apply is false (warn mode) it must not change the request.
type Inspector interface {
	Inspect(r *http.Request, cfg *DLP, apply bool) (DLPResult, error)
}

// Recorder receives every egress decision and alert (the audit log).
type Recorder interface {
	Egress(Event)
	Alert(Alert)
}

// Event is one request through the gateway.
type Event struct {
	Time    time.Time
	Session string
	Profile string
	Mode    Mode
	Intent  string
	Method  string
	// URL is the request's URL; for a tunnel, the host and port.
	URL string
	// Addr is the address dialed, when one was.
	Addr string
	// Status is the origin's answer, or the gateway's own (403) when it refused.
	Status int
	// Decision: allowed, denied, blocked (DLP), redacted, warned (warn mode: would have been
	// denied or blocked), refused (SSRF guard), failed (the origin could not be reached).
	Decision  string
	Rules     []string
	Detectors []string
	Reason    string
	// Headers are the request's headers with values of Authorization-like headers masked.
	Headers  map[string]string
	Duration time.Duration
}

// Options configure a Gateway.
type Options struct {
	Profiles Profiles
	CA       *CA
	// Resolver resolves names for the SSRF guard. Default net.DefaultResolver.
	Resolver Resolver
	// Inspector is the DLP stage. Nil: no DLP.
	Inspector Inspector
	// Recorder receives events. Nil: events are only logged at debug level.
	Recorder Recorder
	// UpstreamRoots verifies origins' certificates. Default: the system's roots.
	UpstreamRoots *x509.CertPool
	// EndSession is called when an alert ends a session (enforce mode, alerts.end_session).
	EndSession func(session, reason string)
	// DialTimeout bounds a connection to an origin. Default 10s.
	DialTimeout time.Duration
	// TenantBudget, when set, bounds the bytes each tenant's sandboxes send out per day.
	TenantBudget TenantBudget
	Logger       *slog.Logger
}

// Gateway is the egress proxy shared by every sandbox of the daemon.
type Gateway struct {
	opts     Options
	profiles atomic.Pointer[Profiles]
	ca       *CA
	dialer   dialer
	proxy    *goproxy.ProxyHttpServer
	log      *slog.Logger
	monitor  *monitor
	sessions *sessions  // subdomain budgets and volume, per session
	days     tenantDays // bytes sent per tenant today (Options.TenantBudget)
	stats    stats      // counters for GET /metrics (metrics.go)

	mu         sync.Mutex
	intents    map[string]intentState
	transports map[string]*http.Transport // by profile: pooled connections stay within a profile

	ln     *chanListener
	server *http.Server
}

type intentState struct {
	name    string
	profile string
	expires time.Time
}

// New builds the gateway and starts serving connections given to Serve.
func New(opts Options) (*Gateway, error) {
	if len(opts.Profiles) == 0 {
		return nil, errors.New("egress: no profiles")
	}
	if opts.CA == nil {
		return nil, errors.New("egress: no CA")
	}
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	g := &Gateway{opts: opts, ca: opts.CA, log: opts.Logger, intents: map[string]intentState{}, transports: map[string]*http.Transport{}}
	ps := opts.Profiles
	g.profiles.Store(&ps)
	nd := &net.Dialer{Timeout: opts.DialTimeout, KeepAlive: 30 * time.Second}
	g.dialer = dialer{resolver: opts.Resolver, timeout: opts.DialTimeout, dial: nd.DialContext}
	g.monitor = newMonitor(g)
	g.sessions = newSessions()
	g.proxy = g.newProxy()
	g.ln = newChanListener()
	g.server = &http.Server{
		Handler:           g.proxy,
		ReadHeaderTimeout: 30 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if sc, ok := c.(*sandboxConn); ok {
				return context.WithValue(ctx, sandboxKey{}, sc.sb)
			}
			return ctx
		},
		// What net/http says of a connection it gives up on (a handler's panic, which it
		// recovers from by closing the connection without an answer) is a warning: the sandbox's
		// client sees only a closed connection, so the log must say why.
		ErrorLog: slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn),
	}
	go g.server.Serve(g.ln)
	return g, nil
}

// Close stops the gateway and ends every connection it serves.
func (g *Gateway) Close() error {
	err := g.server.Close()
	g.mu.Lock()
	for _, t := range g.transports {
		t.CloseIdleConnections()
	}
	g.mu.Unlock()
	return err
}

// Serve takes a connection from a sandbox (the proxy's client side) and serves it. It returns at
// once; the gateway closes c when done.
func (g *Gateway) Serve(c net.Conn, sb Sandbox) error {
	return g.ln.push(&sandboxConn{Conn: c, sb: sb})
}

// SetProfiles replaces the profiles (a reload). Sessions keep their profile by name.
func (g *Gateway) SetProfiles(ps Profiles) { g.profiles.Store(&ps) }

// Profiles returns the profiles in force.
func (g *Gateway) Profiles() Profiles { return *g.profiles.Load() }

// Profile returns a profile by name.
func (g *Gateway) Profile(name string) (*Profile, error) {
	ps := g.Profiles()
	p, ok := ps[name]
	if !ok {
		return nil, fmt.Errorf("no egress profile %q (profiles: %s)", name, strings.Join(ps.Names(), ", "))
	}
	return p, nil
}

// SetIntent makes name the session's current intent for ttl (0: the intent's maximum).
func (g *Gateway) SetIntent(session, profile, name string, ttl time.Duration) (time.Time, error) {
	p, err := g.Profile(profile)
	if err != nil {
		return time.Time{}, err
	}
	in, ok := p.Intents[name]
	if !ok {
		var names []string
		for n := range p.Intents {
			names = append(names, n)
		}
		return time.Time{}, fmt.Errorf("profile %s has no intent %q (intents: %s)", profile, name, strings.Join(names, ", "))
	}
	maxTTL := time.Duration(in.MaxTTL)
	if ttl <= 0 || ttl > maxTTL {
		if ttl > maxTTL {
			return time.Time{}, fmt.Errorf("intent %s may last at most %v, not %v", name, maxTTL, ttl)
		}
		ttl = maxTTL
	}
	exp := time.Now().Add(ttl)
	g.mu.Lock()
	g.intents[session] = intentState{name: name, profile: profile, expires: exp}
	g.mu.Unlock()
	return exp, nil
}

// ClearIntent ends the session's current intent.
func (g *Gateway) ClearIntent(session string) {
	g.mu.Lock()
	delete(g.intents, session)
	g.mu.Unlock()
}

// Intent returns the session's current intent and when it ends, or "" when none.
func (g *Gateway) Intent(session string) (string, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	st, ok := g.intents[session]
	if !ok {
		return "", time.Time{}
	}
	if time.Now().After(st.expires) {
		delete(g.intents, session)
		return "", time.Time{}
	}
	return st.name, st.expires
}

// LastFailure is why the session's last request that could not reach its origin failed, if one
// did at or after since ("" when none): what a failed package install names, since pip says only
// that it found no version.
func (g *Gateway) LastFailure(session string, since time.Time) string {
	return g.sessions.failure(session, since)
}

// Forget drops what the gateway keeps of a session (its intent, counters, subdomains seen and
// bytes sent).
func (g *Gateway) Forget(session string) {
	g.ClearIntent(session)
	g.monitor.forget(session)
	g.sessions.forget(session)
}

type sandboxKey struct{}

type sandboxConn struct {
	net.Conn
	sb Sandbox
}

// reqState travels in a request's context from the policy check to the dial.
type reqState struct {
	sb       Sandbox
	profile  *Profile
	explicit bool         // the port was named by a rule: dangerous ports are allowed
	addrs    []netip.Addr // checked addresses to dial
	ev       *Event
	start    time.Time
	dest     string // what volume is counted by (destination)
	// overVolume is set by the body counter when the request went past the profile's limit.
	overVolume atomic.Bool
}

type reqStateKey struct{}

// connState is what the gateway knows of a client connection: its sandbox and, for an
// intercepted tunnel, why its CONNECT's host name was refused ("" when it was not).
type connState struct {
	sb      Sandbox
	refused string
}

func (g *Gateway) connOf(ctx *goproxy.ProxyCtx) (*connState, bool) {
	if cs, ok := ctx.UserData.(*connState); ok {
		return cs, true
	}
	sb, ok := ctx.Req.Context().Value(sandboxKey{}).(Sandbox)
	return &connState{sb: sb}, ok
}

func (g *Gateway) newProxy() *goproxy.ProxyHttpServer {
	p := goproxy.NewProxyHttpServer()
	p.Logger = proxyLog{g.log}
	p.Verbose = false
	p.KeepDestinationHeaders = true
	p.NonproxyHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "agentbox egress: this is a forward proxy; send absolute URLs (HTTP_PROXY) or CONNECT (HTTPS_PROXY)", http.StatusBadRequest)
	})
	// Nothing goes out but through roundTrip below; this transport is never used directly.
	p.Tr = &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("egress: no route")
	}}
	p.OnRequest().HandleConnectFunc(g.handleConnect)
	p.OnRequest().DoFunc(g.handleRequest)
	p.ConnectDialWithReq = g.connectDial
	return p
}

// proxyLog takes goproxy's lines, which are only its warnings unless Verbose. Most are a
// connection it closed without an answer (a TLS handshake that failed, a request it could not
// read, a hijack that failed), which the sandbox's client sees as nothing but a closed connection:
// those are warnings. The end of a tunnel or a client gone before its answer was written are not
// news, and go to Debug.
type proxyLog struct{ log *slog.Logger }

var proxyDebug = []string{"Error copying to client", "Cannot write response from mitm'd client", "Error closing client connection", "Can't close response body"}

func (l proxyLog) Printf(format string, v ...any) {
	msg := "egress: goproxy: " + strings.TrimSpace(fmt.Sprintf(format, v...))
	for _, d := range proxyDebug {
		if strings.Contains(msg, d) {
			l.log.Debug(msg)
			return
		}
	}
	l.log.Warn(msg)
}

// handleConnect decides a CONNECT. Everything is intercepted, denied hosts included (their
// requests then get a readable 403), except pass-through hosts the policy allows, which are
// tunnelled after the SSRF guard. The host name is checked here, before anything resolves it: a
// name refused in enforce mode is recorded once, and every request in the tunnel gets the
// refusal (whatever its Host header says).
func (g *Gateway) handleConnect(host string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
	cs, ok := g.connOf(ctx)
	if !ok {
		// Every connection comes through Serve with its sandbox: this one did not, and is closed
		// without an answer.
		g.log.Warn("egress: a CONNECT of unknown origin, closed", "host", host, "remote", ctx.Req.RemoteAddr)
		return goproxy.RejectConnect, host
	}
	ctx.UserData = cs
	sb := cs.sb
	mitm := &goproxy.ConnectAction{Action: goproxy.ConnectMitm, TLSConfig: g.tlsConfig}
	p, err := g.Profile(sb.Profile)
	if err != nil {
		return mitm, host // the inner requests get the error
	}
	if p.Mode == ModeDisabled {
		return mitm, host
	}
	t := target(host, "", "", 443)
	intent, _ := g.Intent(sb.Session)
	hv := g.checkHost(sb, p, hostOf(host))
	ev := Event{Time: time.Now().UTC(), Session: sb.Session, Profile: p.Name, Mode: p.Mode, Intent: intent, Method: "CONNECT", URL: host,
		Detectors: hv.detectors, Reason: hv.reason()}
	if hv.action == "block" && p.Mode == ModeEnforce {
		ev.Decision, ev.Status = "blocked", http.StatusForbidden
		cs.refused = "blocked: " + hv.reason()
		g.emit(ev, sb, p, true)
		return mitm, host
	}
	if p.isPassthrough(t.Host) {
		if d := p.Decide(t, intent); d.Allowed {
			ev.Decision, ev.Rules = "allowed", []string{d.Rule, "passthrough"}
			if hv.action == "block" {
				ev.Decision = "warned"
			}
			g.emit(ev, sb, p, ev.Decision == "warned")
			return goproxy.OkConnect, host
		}
	}
	return mitm, host
}

// hostOf is the host name of a host[:port], as sent (case kept), without brackets.
func hostOf(hostport string) string {
	h := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		h = hh
	}
	return strings.Trim(h, "[]")
}

func (g *Gateway) tlsConfig(host string, _ *goproxy.ProxyCtx) (*tls.Config, error) {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	leaf, err := g.ca.Leaf(strings.ToLower(h))
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{*leaf}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}, nil
}

// connectDial dials a pass-through tunnel under the SSRF guard.
func (g *Gateway) connectDial(req *http.Request, network, addr string) (net.Conn, error) {
	sb, _ := req.Context().Value(sandboxKey{}).(Sandbox)
	p, err := g.Profile(sb.Profile)
	if err != nil {
		return nil, err
	}
	t := target(addr, "", "", 443)
	intent, _ := g.Intent(sb.Session)
	c, a, err := g.dialer.dialChecked(req.Context(), p, t.Host, t.Port, p.portExplicit(t, intent))
	ev := Event{Session: sb.Session, Profile: p.Name, Mode: p.Mode, Intent: intent, Method: "CONNECT", URL: addr, Decision: "allowed", Rules: []string{"passthrough"}}
	if err != nil {
		ev.Decision, ev.Reason, ev.Status = "refused", err.Error(), http.StatusForbidden
		g.emit(ev, sb, p, true)
		return nil, err
	}
	ev.Addr = a.String()
	return c, nil
}

// target makes a Target from a host[:port] and a URL's method and path.
func target(hostport, method, path string, defaultPort int) Target {
	host, port := hostport, defaultPort
	if h, ps, err := net.SplitHostPort(hostport); err == nil {
		host = h
		if n, err := strconv.Atoi(ps); err == nil {
			port = n
		}
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	return Target{Host: host, Port: port, Method: method, Path: path}
}

// handleRequest is every request, plain or intercepted. Everything that can refuse it without
// the network runs first, on the name as sent: the policy, the host-name checks, DLP, entropy and
// the volume limit; only then does the SSRF guard resolve the name. So a request refused for what
// its host name, URL, headers or body hold causes no DNS query.
func (g *Gateway) handleRequest(req *http.Request, ctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
	start := time.Now()
	cs, ok := g.connOf(ctx)
	if !ok {
		return req, refuse(req, http.StatusForbidden, "agentbox egress: a connection of unknown origin")
	}
	if cs.refused != "" {
		// The tunnel's CONNECT was refused for its host name, and recorded then.
		return req, refuse(req, http.StatusForbidden, "agentbox egress: "+cs.refused)
	}
	sb := cs.sb
	p, err := g.Profile(sb.Profile)
	if err != nil {
		return req, refuse(req, http.StatusForbidden, "agentbox egress: "+err.Error())
	}
	defPort := 80
	if req.URL.Scheme == "https" {
		defPort = 443
	}
	t := target(req.URL.Host, req.Method, req.URL.EscapedPath(), defPort)
	intent, _ := g.Intent(sb.Session)
	ev := &Event{Time: start.UTC(), Session: sb.Session, Profile: p.Name, Mode: p.Mode, Intent: intent, Method: req.Method, URL: redactURL(req.URL.String()), Headers: maskHeaders(req.Header)}
	enforce := p.Mode == ModeEnforce
	warned := false
	var notes []string // what was only logged, for the record
	stop := func(decision, reason string) (*http.Request, *http.Response) {
		ev.Decision, ev.Reason, ev.Status = decision, reason, http.StatusForbidden
		ev.Duration = time.Since(start)
		g.emit(*ev, sb, p, true)
		return req, refuse(req, http.StatusForbidden, "agentbox egress: "+reason)
	}
	// judge applies a check's action to its reason (without a verb): block refuses in enforce
	// mode (judge reports true, the caller stops) and warns otherwise; log notes.
	judge := func(action, reason string) bool {
		switch action {
		case "block":
			if enforce {
				return true
			}
			warned = true
			ev.Reason = strings.TrimPrefix(ev.Reason+"; blocked: "+reason, "; ")
		case "log":
			notes = append(notes, "logged: "+reason)
		}
		return false
	}
	dest := destination(t.Host)
	var head int64
	if p.Mode != ModeDisabled {
		d := p.Decide(t, intent)
		ev.Rules = append(ev.Rules, d.Rule)
		if !d.Allowed {
			if enforce {
				return stop("denied", "denied: "+d.Reason)
			}
			warned, ev.Reason = true, d.Reason
		}

		// The host name, before it is resolved.
		hv := g.checkHost(sb, p, hostOf(req.URL.Host))
		ev.Detectors = append(ev.Detectors, hv.detectors...)
		if judge(hv.action, hv.reason()) {
			return stop("blocked", "blocked: "+hv.reason())
		}

		// DLP on the URL, headers and body.
		if g.opts.Inspector != nil {
			res, err := g.opts.Inspector.Inspect(req, &p.DLP, enforce)
			if err != nil {
				return stop("blocked", "blocked: the request could not be scanned: "+err.Error())
			}
			ev.Detectors = append(ev.Detectors, res.Detectors...)
			switch {
			case res.Action == "block" && enforce:
				return stop("blocked", res.Reason)
			case res.Action == "block" || res.Action == "redact" && !enforce:
				warned = true
				ev.Reason = strings.TrimPrefix(ev.Reason+"; "+res.Reason, "; ")
			case res.Action == "redact":
				ev.Decision = "redacted"
				ev.Reason = res.Reason
			case res.Action == "log" && res.Reason != "":
				notes = append(notes, res.Reason)
			}
			if res.Redacted {
				ev.Headers = maskHeaders(req.Header)
				ev.URL = redactURL(req.URL.String())
			}
		}

		// High-entropy tokens, in the request as it will be sent.
		if p.Entropy.Action != "off" {
			if efs := scanEntropy(req, &p.Entropy); len(efs) > 0 {
				ev.Detectors = append(ev.Detectors, "entropy")
				reason := efs[0].reason()
				if len(efs) > 1 {
					reason += fmt.Sprintf(" (and %d more)", len(efs)-1)
				}
				if p.Entropy.Action == "block" {
					reason += "; profile " + p.Name + " blocks such tokens (entropy.action)"
				}
				if judge(p.Entropy.Action, reason) {
					return stop("blocked", "blocked: "+reason)
				}
			}
		}

		// Volume: what this session has sent to the destination, and what this request adds.
		head = headBytes(req)
		sent, ok := g.sessions.sent(sb.Session, dest)
		if !ok {
			reason := fmt.Sprintf("this session has reached %d destinations", maxDests)
			if judge("block", reason) {
				return stop("blocked", "blocked: "+reason)
			}
		}
		if limit := int64(*p.Volume.MaxBytesPerDestination); limit > 0 && sent+head+max(req.ContentLength, 0) > limit {
			reason := volumeReason(p, dest, sent)
			ev.Detectors = append(ev.Detectors, "volume")
			if judge("block", reason) {
				return stop("blocked", "blocked: "+reason)
			}
		}
		if _, reason := g.tenantOver(sb.Session, head+max(req.ContentLength, 0)); reason != "" {
			ev.Detectors = append(ev.Detectors, "volume")
			if judge("block", reason) {
				return stop("blocked", "blocked: "+reason)
			}
		}
	}
	// The SSRF guard resolves now and pins the addresses the dial will use.
	explicit := p.portExplicit(t, intent)
	addrs, err := g.resolveChecked(req.Context(), p, t, explicit)
	if err != nil {
		return stop("refused", err.Error())
	}
	if ev.Decision == "" {
		ev.Decision = "allowed"
	}
	if warned {
		ev.Decision = "warned"
	}
	if len(notes) > 0 {
		ev.Reason = strings.TrimPrefix(ev.Reason+"; "+strings.Join(notes, "; "), "; ")
	}
	st := &reqState{sb: sb, profile: p, explicit: explicit, addrs: addrs, ev: ev, start: start, dest: dest}
	if p.Mode != ModeDisabled {
		g.sessions.addSent(sb.Session, dest, head)
		g.countTenant(sb.Session, head)
		if req.Body != nil && req.Body != http.NoBody {
			req.Body = &countingBody{ReadCloser: req.Body, g: g, st: st, limit: int64(*p.Volume.MaxBytesPerDestination), enforce: enforce}
		}
	}
	req = req.WithContext(context.WithValue(req.Context(), reqStateKey{}, st))
	ctx.RoundTripper = goproxy.RoundTripperFunc(g.roundTrip)
	return req, nil
}

func volumeReason(p *Profile, dest string, sent int64) string {
	return fmt.Sprintf("this session has sent %s to %s; profile %s allows %s per destination (volume.max_bytes_per_destination)",
		ByteSize(sent), dest, p.Name, *p.Volume.MaxBytesPerDestination)
}

// headBytes approximates what a request's line and headers take on the wire.
func headBytes(r *http.Request) int64 {
	n := len(r.Method) + len(r.URL.RequestURI()) + len(" HTTP/1.1\r\n") + len("Host: \r\n") + len(r.Host) + 2
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return int64(n)
}

// errVolume stops a body that goes past the profile's volume limit.
var errVolume = errors.New("egress: the session's volume limit for this destination is reached")

// countingBody counts a request body's bytes against the session's volume as they are sent.
type countingBody struct {
	io.ReadCloser
	g       *Gateway
	st      *reqState
	limit   int64
	enforce bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		total := b.g.sessions.addSent(b.st.sb.Session, b.st.dest, int64(n))
		b.g.countTenant(b.st.sb.Session, int64(n))
		if b.limit > 0 && total > b.limit && !b.st.overVolume.Swap(true) && b.enforce {
			return 0, errVolume
		}
		if b.enforce && b.st.overVolume.Load() {
			return 0, errVolume
		}
	}
	return n, err
}

func (g *Gateway) resolveChecked(ctx context.Context, p *Profile, t Target, explicit bool) ([]netip.Addr, error) {
	if containsInt(p.DangerousPorts, t.Port) && !explicit {
		return nil, &SSRFError{Host: t.Host, Reason: fmt.Sprintf("port %d is a dangerous port (allow it with a rule that names the port)", t.Port)}
	}
	if ip, err := netip.ParseAddr(t.Host); err == nil {
		if err := checkAddr(ip, p.allowPrivate); err != nil {
			return nil, &SSRFError{Host: t.Host, Reason: "address " + err.Error()}
		}
		return []netip.Addr{ip}, nil
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	addrs, err := g.dialer.resolver.LookupNetIP(lctx, "ip", t.Host)
	cancel()
	if err != nil {
		return nil, &SSRFError{Host: t.Host, Reason: fmt.Sprintf("cannot resolve %s: %v", t.Host, err)}
	}
	if len(addrs) == 0 {
		return nil, &SSRFError{Host: t.Host, Reason: "the name has no addresses"}
	}
	for _, a := range addrs {
		if err := checkAddr(a, p.allowPrivate); err != nil {
			return nil, &SSRFError{Host: t.Host, Reason: fmt.Sprintf("%s resolves to %v", t.Host, err)}
		}
	}
	return addrs, nil
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// roundTrip sends a checked request through its profile's transport, dialing only the addresses
// the guard checked, scans the response, and records the outcome.
func (g *Gateway) roundTrip(req *http.Request, _ *goproxy.ProxyCtx) (*http.Response, error) {
	st, _ := req.Context().Value(reqStateKey{}).(*reqState)
	if st == nil {
		return nil, errors.New("egress: request without a policy decision")
	}
	p := st.profile
	resp, err := g.transport(p).RoundTrip(req)
	ev := *st.ev
	ev.Duration = time.Since(st.start)
	violation := ev.Decision == "warned" // warn mode: what enforce would have refused went out
	switch {
	case st.overVolume.Load():
		// The body went past the volume limit while it was sent.
		sent, _ := g.sessions.sent(st.sb.Session, st.dest)
		reason := volumeReason(p, st.dest, sent)
		ev.Detectors = append(ev.Detectors, "volume")
		violation = true
		if p.Mode == ModeEnforce {
			if resp != nil {
				resp.Body.Close()
			}
			ev.Decision, ev.Reason, ev.Status = "blocked", "blocked: "+reason, http.StatusForbidden
			g.emit(ev, st.sb, p, true)
			return refuse(req, http.StatusForbidden, "agentbox egress: blocked: "+reason), nil
		}
		ev.Decision = "warned"
		ev.Reason = strings.TrimPrefix(ev.Reason+"; blocked: "+reason, "; ")
	case err != nil:
		if ev.Decision == "allowed" || ev.Decision == "redacted" {
			ev.Decision = "failed"
		}
	}
	if err != nil {
		// The origin could not be reached or did not answer. The client gets the gateway's own
		// answer saying so: goproxy would otherwise close an intercepted connection without
		// one, which a client reports as a proxy that hung up (pip: "Cannot connect to proxy",
		// RemoteDisconnected), naming neither the origin nor the reason.
		if resp != nil {
			resp.Body.Close()
		}
		reason := fmt.Sprintf("cannot reach %s", req.URL.Host)
		if ev.Addr != "" {
			reason += " (" + ev.Addr + ")"
		}
		reason += ": " + err.Error()
		ev.Reason = strings.TrimPrefix(ev.Reason+"; "+reason, "; ")
		ev.Status = http.StatusBadGateway
		g.sessions.setFailure(st.sb.Session, reason)
		g.emit(ev, st.sb, p, violation)
		g.log.Warn("egress: the origin did not answer", "session", st.sb.Session, "url", ev.URL, "addr", ev.Addr, "err", err)
		out := refuse(req, http.StatusBadGateway, "agentbox egress: "+reason)
		out.Header.Set("X-Agentbox-Egress", "failed")
		return out, nil
	}
	ev.Status = resp.StatusCode
	if p.Mode != ModeDisabled && p.Responses.Action != "off" {
		resp = g.checkResponse(req, resp, p, &ev)
	}
	g.emit(ev, st.sb, p, violation)
	return resp, nil
}

func (g *Gateway) transport(p *Profile) *http.Transport {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t, ok := g.transports[p.Name]; ok {
		return t
	}
	t := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			st, _ := ctx.Value(reqStateKey{}).(*reqState)
			if st == nil {
				return nil, errors.New("egress: dial without a policy decision")
			}
			_, port, _ := net.SplitHostPort(addr)
			var last error
			for _, a := range st.addrs {
				c, err := g.dialer.dial(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
				if err == nil {
					st.ev.Addr = a.String()
					return c, nil
				}
				last = err
			}
			return nil, last
		},
		TLSClientConfig:       &tls.Config{RootCAs: g.opts.UpstreamRoots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     false,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       60 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		Proxy:                 nil,
	}
	g.transports[p.Name] = t
	return t
}

// refuse is the gateway's own answer: a 403 whose body says why, so an agent can read it.
func refuse(req *http.Request, status int, reason string) *http.Response {
	resp := goproxy.NewResponse(req, goproxy.ContentTypeText, status, reason+"\n")
	resp.Header.Set("X-Agentbox-Egress", "refused")
	return resp
}

func (g *Gateway) record(ev Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	g.log.Debug("egress", "session", ev.Session, "method", ev.Method, "url", ev.URL, "decision", ev.Decision, "status", ev.Status, "reason", ev.Reason)
	g.stats.request(ev)
	if g.opts.Recorder != nil {
		g.opts.Recorder.Egress(ev)
	}
}

// emit redacts ev (redact.go), records it and, for a violation, counts it against the session:
// nothing leaves the gateway (record, log, alert, webhook, the reason a session is ended with)
// before it is redacted.
func (g *Gateway) emit(ev Event, sb Sandbox, p *Profile, violation bool) {
	if len(ev.Detectors) > 1 {
		uniq := make([]string, 0, len(ev.Detectors)) // the host's findings may repeat DLP's
		for _, d := range ev.Detectors {
			if !slices.Contains(uniq, d) {
				uniq = append(uniq, d)
			}
		}
		ev.Detectors = uniq
	}
	g.redactEvent(&ev, p)
	g.record(ev)
	if violation {
		g.monitor.count(sb, p, ev, "egress", true)
	}
}

// sensitiveHeaders have their values masked in events.
var sensitiveHeaders = map[string]bool{"Authorization": true, "Proxy-Authorization": true, "Cookie": true, "Set-Cookie": true, "X-Api-Key": true, "Api-Key": true, "X-Auth-Token": true}

func maskHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		val := strings.Join(v, ", ")
		if sensitiveHeaders[http.CanonicalHeaderKey(k)] {
			val = "[masked]"
		}
		if len(val) > 512 {
			val = val[:512] + "…"
		}
		out[k] = val
	}
	return out
}

// redactURL drops userinfo from a URL for the record.
func redactURL(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		if at := strings.IndexByte(s[i+3:], '@'); at >= 0 {
			if slash := strings.IndexByte(s[i+3:], '/'); slash < 0 || at < slash {
				s = s[:i+3] + "[masked]@" + s[i+3+at+1:]
			}
		}
	}
	return s
}

// chanListener is a net.Listener fed by Serve.
type chanListener struct {
	ch     chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) push(c net.Conn) error {
	select {
	case l.ch <- c:
		return nil
	case <-l.done:
		c.Close()
		return net.ErrClosed
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return &net.UnixAddr{Name: "agentbox-egress", Net: "unix"} }

var _ io.Closer = (*Gateway)(nil)
