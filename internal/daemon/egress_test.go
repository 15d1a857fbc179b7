package daemon_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/egress"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

const egressProfiles = `
name: test
mode: enforce
allow:
  - domain: api.allowed.test
  - domain: metadata.test
  - domain: private.test
intents:
  weather-lookup:
    allow:
      - domain: api.weather.test
        methods: [GET]
    max_ttl: 10m
dlp:
  actions: {payment_card: block, secret: redact}
alerts: {threshold: 10, window: 5m}
`

const alertsProfile = `
name: test-alerts
allow:
  - domain: api.allowed.test
alerts: {threshold: 3, window: 5m, end_session: true}
`

const warnProfile = `
name: test-warn
mode: warn
allow:
  - domain: api.allowed.test
alerts: {threshold: 0}
`

// origin is what the test's public host saw.
type originHit struct {
	Method, Path, Host, Auth, Body string
}

// startEgress starts a daemon with both tiers and a gateway whose world is one public host (a
// network namespace of the test's own) serving HTTP and HTTPS under several names.
func startEgress(t *testing.T) (*client.Client, chan originHit) {
	t.Helper()
	testenv.RequireRoot(t)
	l := heavy.LayoutFor(config.DefaultDataDir())
	if _, err := os.Stat(l.Runsc(heavy.RunscVersion)); err != nil {
		testenv.Skip(t, "no runsc: run `agentbox setup`")
	}
	host := testenv.NewPublicHost(t)
	hits := make(chan originHit, 100)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hits <- originHit{r.Method, r.URL.Path, r.Host, r.Header.Get("Authorization"), string(b)}
		fmt.Fprintf(w, "hello from %s%s", r.Host, r.URL.Path)
	})
	// The origin's certificates come from a "public" CA the gateway trusts as an upstream root.
	public, err := egress.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "upstream.pem")
	os.WriteFile(caFile, public.CertPEM, 0o644)
	tlsSrv := &http.Server{Handler: handler, TLSConfig: &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) { return public.Leaf(h.ServerName) }}}
	go tlsSrv.ServeTLS(host.Listen(t, 443), "", "")
	go (&http.Server{Handler: handler}).Serve(host.Listen(t, 80))
	t.Cleanup(func() { tlsSrv.Close() })

	profiles := t.TempDir()
	os.WriteFile(filepath.Join(profiles, "test.yaml"), []byte(egressProfiles), 0o644)
	os.WriteFile(filepath.Join(profiles, "test-alerts.yaml"), []byte(alertsProfile), 0o644)
	os.WriteFile(filepath.Join(profiles, "test-warn.yaml"), []byte(warnProfile), 0o644)
	warm := 1
	c, _ := startWith(t, func(c *config.Config) {
		mustConfigure(t, heavy.Configure(c, func(h *heavy.Config) { h.Enabled, h.Warm = heavy.On, &warm }))
		c.Egress.Dir = t.TempDir()
		c.Egress.ProfilesDir = profiles
		c.Egress.UpstreamCAFile = caFile
		c.Egress.Hosts = map[string][]string{
			"api.allowed.test": {host.Addr}, "api.weather.test": {host.Addr}, "unknown.test": {host.Addr},
			"private.test": {"10.0.0.1"}, "metadata.test": {"169.254.169.254"},
		}
	})
	return c, hits
}

// fetch is Python run in the sandbox: each line of urls.json is fetched through the proxy the
// sandbox's environment names, with the standard library only.
const fetch = `
import json, urllib.request, urllib.error
def fetch(url, data=None, headers={}):
    req = urllib.request.Request(url, data=data.encode() if data else None, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            return [r.status, r.read().decode()]
    except urllib.error.HTTPError as e:
        return [e.code, e.read().decode()]
    except Exception as e:
        return [0, repr(e)]
`

func runFetch(t *testing.T, c *client.Client, session, call string) (int, string) {
	t.Helper()
	// NO_PROXY is emptied so that even loopback addresses go to the gateway, which must refuse
	// them (the sandbox's own loopback is not the host's in any case).
	res, err := c.RunInSession(context.Background(), session, api.RunRequest{Code: fetch + "print(json.dumps(" + call + "))\n", Timeout: 60, Env: map[string]string{"NO_PROXY": "", "no_proxy": ""}})
	if err != nil {
		t.Fatalf("%s: %v", call, err)
	}
	if res.Error != nil {
		t.Fatalf("%s: %s", call, res.Error.Traceback)
	}
	var out [2]any
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		t.Fatalf("%s: %q", call, res.Stdout)
	}
	return int(out[0].(float64)), out[1].(string)
}

func TestEgress(t *testing.T) {
	c, hits := startEgress(t)
	ctx := context.Background()
	newSession := func(profile string) string {
		s, err := c.CreateSession(ctx, api.CreateSessionRequest{Network: true, EgressProfile: profile})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.CloseSession(ctx, s.ID) })
		if s.Runtime != "heavy" || !s.Network {
			t.Fatalf("a session with network: %+v", s)
		}
		return s.ID
	}

	t.Run("AllowedHTTPSThroughInterception", func(t *testing.T) {
		s := newSession("test")
		status, body := runFetch(t, c, s, `fetch("https://api.allowed.test/v1/ping")`)
		if status != 200 || body != "hello from api.allowed.test/v1/ping" {
			t.Fatalf("%d %q", status, body)
		}
		// The sandbox saw a certificate of the agentbox CA, not the origin's.
		res, err := c.RunInSession(ctx, s, api.RunRequest{Code: `
import socket, ssl
ctx = ssl.create_default_context()
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(b"CONNECT api.allowed.test:443 HTTP/1.1\r\nHost: api.allowed.test:443\r\n\r\n")
print(s.recv(100).split(b"\r\n")[0].decode())
t = ctx.wrap_socket(s, server_hostname="api.allowed.test")
print(dict(x[0] for x in t.getpeercert()["issuer"])["organizationName"])
`})
		if err != nil || res.Error != nil || !strings.Contains(res.Stdout, "200") || !strings.HasSuffix(res.Stdout, "agentbox\n") {
			t.Fatalf("certificate seen in the sandbox: %+v %v", res, err)
		}
	})

	t.Run("UnknownDomainDenied", func(t *testing.T) {
		s := newSession("test")
		for _, u := range []string{"https://unknown.test/", "http://unknown.test/"} {
			status, body := runFetch(t, c, s, `fetch("`+u+`")`)
			if status != 403 || !strings.Contains(body, "not allowed by profile test") {
				t.Fatalf("%s: %d %q", u, status, body)
			}
		}
	})

	t.Run("SSRF", func(t *testing.T) {
		s := newSession("test")
		for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:8420/v1/health", "http://private.test/", "https://metadata.test/"} {
			status, body := runFetch(t, c, s, `fetch("`+u+`")`)
			if status != 403 {
				t.Fatalf("%s: %d %q", u, status, body)
			}
			t.Logf("%s: %s", u, strings.TrimSpace(body))
		}
	})

	t.Run("Intent", func(t *testing.T) {
		s := newSession("test")
		u := `fetch("https://api.weather.test/forecast?city=Tokyo")`
		if status, _ := runFetch(t, c, s, u); status != 403 {
			t.Fatalf("before the intent: %d", status)
		}
		in, err := c.SetIntent(ctx, s, "weather-lookup", 0)
		if err != nil || in.Name != "weather-lookup" || in.ExpiresAt == nil {
			t.Fatalf("set: %+v %v", in, err)
		}
		if status, body := runFetch(t, c, s, u); status != 200 || !strings.Contains(body, "/forecast") {
			t.Fatalf("with the intent: %d %q", status, body)
		}
		if err := c.ClearIntent(ctx, s); err != nil {
			t.Fatal(err)
		}
		if status, _ := runFetch(t, c, s, u); status != 403 {
			t.Fatalf("after clearing: %d", status)
		}
		if _, err := c.SetIntent(ctx, s, "weather-lookup", 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
		if status, _ := runFetch(t, c, s, u); status != 403 {
			t.Fatalf("after the TTL: %d", status)
		}
		var e *client.Error
		if _, err := c.SetIntent(ctx, s, "no-such-intent", 0); !errors.As(err, &e) || e.Code != "invalid_request" || !strings.Contains(e.Message, "weather-lookup") {
			t.Fatalf("an unknown intent: %v", err)
		}
	})

	t.Run("DirectSocketFails", func(t *testing.T) {
		s := newSession("test")
		res, err := c.RunInSession(ctx, s, api.RunRequest{Code: `
import socket
for host in ("203.0.113.2", "203.0.113.6", "api.allowed.test", "8.8.8.8"):
    try:
        socket.create_connection((host, 443), timeout=3).close()
        print(host, "connected")
    except OSError as e:
        print(host, "failed")
try:
    socket.getaddrinfo("api.allowed.test", 443)
    print("dns resolved")
except OSError:
    print("no dns")
`, Timeout: 60})
		if err != nil || strings.Contains(res.Stdout, "connected") || !strings.Contains(res.Stdout, "no dns") {
			t.Fatalf("%+v %v", res, err)
		}
	})

	t.Run("WarnMode", func(t *testing.T) {
		s := newSession("test-warn")
		status, body := runFetch(t, c, s, `fetch("https://unknown.test/anything")`)
		if status != 200 || !strings.Contains(body, "hello from unknown.test") {
			t.Fatalf("warn mode: %d %q", status, body)
		}
		recs, err := c.Audit(ctx, client.AuditQuery{Session: s, Kind: "egress"})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range recs {
			found = found || r.Egress != nil && r.Egress.Decision == "warned" && strings.Contains(r.Egress.URL, "unknown.test/anything") && strings.Contains(r.Egress.Reason, "not allowed")
		}
		if !found {
			t.Fatalf("warn mode left no warned egress record: %+v", recs)
		}
	})

	t.Run("ViolationsEndSession", func(t *testing.T) {
		s := newSession("test-alerts")
		for range 3 {
			// The third run may end with the session it belongs to.
			c.RunInSession(ctx, s, api.RunRequest{Code: fetch + "print(fetch('https://unknown.test/'))\n", Timeout: 60})
		}
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := c.GetSession(ctx, s); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatal("three violations did not end the session")
	})

	t.Run("AlertAudited", func(t *testing.T) {
		recs, err := c.Audit(ctx, client.AuditQuery{Kind: "alert"})
		if err != nil || len(recs) == 0 || recs[len(recs)-1].Alert == nil {
			t.Fatalf("no alert record: %+v %v", recs, err)
		}
	})

	t.Run("DLP", func(t *testing.T) {
		s := newSession("test")
		drain := func() {
			for len(hits) > 0 {
				<-hits
			}
		}
		drain()
		status, body := runFetch(t, c, s, `fetch("https://api.allowed.test/pay", data=json.dumps({"card": "4111 1111 1111 1111", "amount": 5}), headers={"Content-Type": "application/json"})`)
		if status != 403 || !strings.Contains(body, "payment card") || len(hits) != 0 {
			t.Fatalf("a valid card number: %d %q (origin hits %d)", status, body, len(hits))
		}
		status, body = runFetch(t, c, s, `fetch("https://api.allowed.test/pay", data=json.dumps({"card": "4111 1111 1111 1112", "amount": 5}), headers={"Content-Type": "application/json"})`)
		if status != 200 {
			t.Fatalf("a number that fails Luhn: %d %q", status, body)
		}
		drain()
		status, body = runFetch(t, c, s, `fetch("https://api.allowed.test/keys", headers={"Authorization": "AWS AKIAQYLPMN5HHHFPZAM2"})`)
		if status != 200 {
			t.Fatalf("an AWS key in a header: %d %q", status, body)
		}
		h := <-hits
		if strings.Contains(h.Auth, "AKIAQYLPMN5HHHFPZAM2") || !strings.Contains(h.Auth, "REDACTED") {
			t.Fatalf("the origin saw Authorization %q", h.Auth)
		}
		recs, err := c.Audit(ctx, client.AuditQuery{Session: s, Kind: "egress"})
		if err != nil {
			t.Fatal(err)
		}
		var decisions []string
		for _, r := range recs {
			b, _ := json.Marshal(r)
			if strings.Contains(string(b), "AKIAQYLPMN5HHHFPZAM2") || strings.Contains(string(b), "4111 1111 1111 1111") {
				t.Fatalf("a secret in the audit log: %s", b)
			}
			decisions = append(decisions, r.Egress.Decision)
		}
		if got := strings.Join(decisions, " "); !strings.Contains(got, "blocked") || !strings.Contains(got, "redacted") {
			t.Fatalf("egress decisions recorded: %s", got)
		}
	})

	t.Run("NetworkNeedsHeavy", func(t *testing.T) {
		_, err := c.Run(ctx, api.RunRequest{Code: "print(1)", Runtime: "nano", Network: true})
		var e *client.Error
		if !errors.As(err, &e) || e.Code != "invalid_request" {
			t.Fatalf("nano with network: %v", err)
		}
		_, err = c.CreateSession(ctx, api.CreateSessionRequest{Network: true, EgressProfile: "nope"})
		if !errors.As(err, &e) || e.Code != "invalid_request" || !strings.Contains(e.Message, "test-warn") {
			t.Fatalf("an unknown profile: %v", err)
		}
	})

	t.Run("OneShotRun", func(t *testing.T) {
		res, err := c.Run(ctx, api.RunRequest{Code: fetch + "print(json.dumps(fetch('https://api.allowed.test/one')))\n", Network: true, EgressProfile: "test", Timeout: 60})
		if err != nil || !strings.Contains(res.Stdout, "hello from api.allowed.test/one") || res.Runtime != "heavy" {
			t.Fatalf("%+v %v", res, err)
		}
	})
	_ = hits
}
