package daemon

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/egress"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// gateway adapts the egress gateway to what the heavy tier and the Manager ask of it.
type gateway struct {
	*egress.Gateway
	ca   []byte
	dir  string // profiles
	insp *egress.DLPInspector
}

// ReloadPolicy reads the profiles again; an error leaves the old ones in force.
func (g *gateway) ReloadPolicy() ([]string, error) {
	ps, err := loadProfiles(g.dir, g.insp)
	if err != nil {
		return nil, err
	}
	g.SetProfiles(ps)
	return ps.Names(), nil
}

// Interface guards.
var (
	_ heavy.Egress           = (*gateway)(nil)
	_ heavy.IndexPolicy      = (*gateway)(nil)
	_ heavy.FailureReporter  = (*gateway)(nil)
	_ sandbox.Intents        = (*gateway)(nil)
	_ sandbox.PolicyReloader = (*gateway)(nil)
)

func (g *gateway) Serve(c net.Conn, session, profile string) error {
	return g.Gateway.Serve(c, egress.Sandbox{Session: session, Profile: profile})
}

func (g *gateway) CA() []byte { return g.ca }

func (g *gateway) CheckProfile(name string) error {
	_, err := g.Profile(name)
	return err
}

// CheckIndex refuses, before a sandbox installs packages on demand, a package index the profile
// does not let sandboxes reach (heavy.IndexPolicy).
func (g *gateway) CheckIndex(profile, index string) error {
	p, err := g.Profile(profile)
	if err != nil {
		return err
	}
	u, err := url.Parse(index)
	if err != nil || u.Hostname() == "" {
		return sandbox.Errorf(sandbox.KindInternal, "the package index %q is not a URL", index).WithHint("set heavy.package_index to the index's https URL")
	}
	port := 443
	if u.Scheme == "http" {
		port = 80
	}
	if u.Port() != "" {
		port, _ = strconv.Atoi(u.Port())
	}
	d := p.Decide(egress.Target{Host: strings.ToLower(u.Hostname()), Port: port, Method: "GET", Path: u.EscapedPath() + "/"}, "")
	if !d.Allowed {
		return sandbox.Errorf(sandbox.KindPolicyViolation, "packages on demand come from the package index %s, and egress profile %s does not allow it: %s", index, p.Name, d.Reason).
			WithHint("use an egress profile that allows %s, or ask for packages an image has (GET /v1/images)", u.Hostname())
	}
	return nil
}

// endSession is set once the Manager exists: the gateway's alerts can end sessions.
type endSession struct {
	f atomic.Pointer[func(id, reason string)]
}

func (e *endSession) call(id, reason string) {
	if f := e.f.Load(); f != nil {
		(*f)(id, reason)
	}
}

// tenantBudget tells the gateway whose a session or run is and what its tenant may send a day.
// The Manager is built after the gateway, so it is set once there is one.
type tenantBudget struct {
	of      atomic.Pointer[func(id string) (string, bool)]
	tenants config.Tenants
}

// tenant names a session's tenant once the Manager is wired ("" before, for the daemon's own
// sessions, and for a session it does not know).
func (b *tenantBudget) tenant(session string) string {
	if f := b.of.Load(); f != nil {
		t, _ := (*f)(session)
		return t
	}
	return ""
}

func (b *tenantBudget) budget(session string) (string, int64) {
	f := b.of.Load()
	if f == nil {
		return "", 0
	}
	tenant, ok := (*f)(session)
	if !ok || tenant == "" {
		return tenant, 0
	}
	return tenant, b.tenants.EgressBytesPerDay(tenant)
}

// newGateway builds the egress gateway, or nil when it is off.
func newGateway(cfg config.Config, rec egress.Recorder, insp *egress.DLPInspector, end *endSession, tb *tenantBudget, log *slog.Logger) (*gateway, error) {
	if !cfg.EgressEnabled() {
		log.Info("egress gateway off: sandboxes have no network")
		return nil, nil
	}
	ps, err := loadProfiles(cfg.EgressProfilesDir(), insp)
	if err != nil {
		return nil, fmt.Errorf("egress policy: %w", err)
	}
	ca, err := egress.LoadOrCreateCA(cfg.EgressDir())
	if err != nil {
		return nil, err
	}
	var roots *x509.CertPool
	if cfg.Egress.UpstreamCAFile != "" {
		roots, err = x509.SystemCertPool()
		if err != nil {
			roots = x509.NewCertPool()
		}
		pem, err := os.ReadFile(cfg.Egress.UpstreamCAFile)
		if err != nil {
			return nil, fmt.Errorf("egress upstream CA: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("egress upstream CA %s: no PEM certificate in it", cfg.Egress.UpstreamCAFile)
		}
	}
	var resolver egress.Resolver = net.DefaultResolver
	if addr := cfg.Egress.Resolver; addr != "" {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("egress.resolver %q: give a DNS server as host:port", addr)
		}
		resolver = dnsServer(addr)
	}
	if len(cfg.Egress.Hosts) > 0 {
		h := hostsResolver{table: map[string][]netip.Addr{}, next: resolver}
		for name, addrs := range cfg.Egress.Hosts {
			for _, a := range addrs {
				ip, err := netip.ParseAddr(a)
				if err != nil {
					return nil, fmt.Errorf("egress.hosts %s: %q is not an IP address", name, a)
				}
				h.table[name] = append(h.table[name], ip)
			}
		}
		resolver = h
	}
	g, err := egress.New(egress.Options{
		Profiles:      ps,
		CA:            ca,
		Resolver:      resolver,
		Inspector:     insp,
		Recorder:      rec,
		UpstreamRoots: roots,
		EndSession:    end.call,
		TenantBudget:  tb.budget,
		Logger:        log,
	})
	if err != nil {
		return nil, err
	}
	log.Info("egress gateway ready", "profiles", ps.Names(), "ca", cfg.EgressDir())
	return &gateway{Gateway: g, ca: ca.CertPEM, dir: cfg.EgressProfilesDir(), insp: insp}, nil
}

// dnsServer is a resolver that asks one DNS server (egress.resolver) and nothing else.
func dnsServer(addr string) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}

// hostsResolver answers pinned names from a table and the rest from the next resolver.
type hostsResolver struct {
	table map[string][]netip.Addr
	next  egress.Resolver
}

func (h hostsResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, ok := h.table[host]; ok {
		return a, nil
	}
	return h.next.LookupNetIP(ctx, network, host)
}

// logRecorder writes egress events and alerts to the log, until the audit log takes them.
type logRecorder struct{ log *slog.Logger }

func (r logRecorder) Egress(e egress.Event) {
	r.log.Info("egress", "session", e.Session, "method", e.Method, "url", e.URL, "decision", e.Decision, "status", e.Status, "rules", e.Rules, "detectors", e.Detectors, "reason", e.Reason)
}

func (r logRecorder) Alert(a egress.Alert) {
	r.log.Warn("egress alert", "session", a.Session, "violations", a.Violations, "window", a.Window, "ended", a.Ended)
}

// loadProfiles reads the profiles and builds each one's DLP scanner, so a custom pattern that does
// not compile is an error now, not at a sandbox's first request.
func loadProfiles(dir string, insp *egress.DLPInspector) (egress.Profiles, error) {
	ps, err := egress.LoadProfiles(dir)
	if err != nil {
		return nil, err
	}
	for _, name := range ps.Names() {
		if err := insp.Check(ps[name]); err != nil {
			return nil, err
		}
	}
	return ps, nil
}
