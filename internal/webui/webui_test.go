package webui_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/artifacts"
	"github.com/agentbox-dev/agentbox/internal/audit"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/webui"
)

const adminKey = "ui-test-admin-key-0123456789"

// console is a web console over a real Manager (a fake tier that answers "ok", and a PNG
// artifact for code that says "plot"), a real audit log and artifact store, and a key file.
type console struct {
	srv   *httptest.Server
	m     *sandbox.Audited
	log   *audit.Log
	keys  string
	check func() webui.AuditCheck
}

// png is the smallest thing the artifact route serves as an image.
var png = []byte("\x89PNG\r\n\x1a\n fake image")

func newConsole(t *testing.T, tlsOn bool) *console {
	t.Helper()
	f := runtimetest.NewFake(sandbox.Capabilities{Tier: "nano", Sessions: true, Contained: true})
	f.Answer = func(ctx context.Context, req *sandbox.RunRequest, s *runtimetest.FakeSession) (*sandbox.Result, error) {
		res := &sandbox.Result{Stdout: "ok\n"}
		if strings.Contains(req.Code, "plot") {
			res.Artifacts = []sandbox.Artifact{{Name: "figure-1.png", MIME: "image/png", Content: png}}
		}
		return res, nil
	}
	return newConsoleWith(t, f, tlsOn)
}

// newConsoleOf is a console over the tier rt, on plain HTTP.
func newConsoleOf(t *testing.T, rt sandbox.Runtime) *console { return newConsoleWith(t, rt, false) }

func newConsoleWith(t *testing.T, rt sandbox.Runtime, tlsOn bool) *console {
	t.Helper()
	store, err := artifacts.Open(t.TempDir(), artifacts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	al, err := audit.Open(t.TempDir(), audit.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{rt}, Artifacts: store, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	a := sandbox.WithAudit(m, al)
	t.Cleanup(func() { a.Close() })
	keysFile := filepath.Join(t.TempDir(), auth.KeysFile)
	keys, err := auth.NewKeys(adminKey, keysFile)
	if err != nil {
		t.Fatal(err)
	}
	c := &console{m: a, log: al, keys: keysFile, check: func() webui.AuditCheck {
		return webui.AuditCheck{OK: true, Records: 3, Summary: "3 records, 1 checkpoints; ok", LastSigned: time.Now()}
	}}
	ui, err := webui.New(webui.Options{Engine: a, Keys: keys, Logger: log, Version: "test",
		VerifyAudit: func(context.Context) (webui.AuditCheck, error) { return c.check(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	if tlsOn {
		c.srv = httptest.NewTLSServer(ui)
	} else {
		c.srv = httptest.NewServer(ui)
	}
	t.Cleanup(c.srv.Close)
	return c
}

// tenantKey adds a key of tenant with scopes to the key file.
func (c *console) tenantKey(t *testing.T, tenant string, scopes ...auth.Scope) (string, auth.KeyRecord) {
	t.Helper()
	k, rec, err := auth.NewKey(tenant, tenant+"-agent", scopes, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.UpdateKeyFile(c.keys, func(r []auth.KeyRecord) ([]auth.KeyRecord, error) { return append(r, rec), nil }); err != nil {
		t.Fatal(err)
	}
	return k, rec
}

// browser is a client with a cookie jar that does not follow redirects, as a test wants to see
// them; it sends what a browser sends with a same-origin form.
type browser struct {
	t    *testing.T
	c    *console
	http *http.Client
}

func (c *console) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	hc := *c.srv.Client() // a client of its own (the server's is shared), with its own jar
	hc.Jar = jar
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{t: t, c: c, http: &hc}
}

func (b *browser) do(method, path string, form url.Values, header http.Header) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.c.srv.URL+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.c.srv.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := b.http.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res, string(out)
}

func (b *browser) get(path string) (*http.Response, string) { return b.do("GET", path, nil, nil) }

var hiddenField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// field returns the csrf field of a page.
func field(t *testing.T, page string) string {
	t.Helper()
	m := hiddenField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf field in the page:\n%s", page)
	}
	return m[1]
}

// login logs in with key and returns the page's CSRF token of the UI session.
func (b *browser) login(key string) string {
	b.t.Helper()
	_, page := b.get("/ui/login")
	res, _ := b.do("POST", "/ui/login", url.Values{"csrf": {field(b.t, page)}, "key": {key}, "next": {"/ui/sessions"}}, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/sessions" {
		b.t.Fatalf("login: %d to %q, want 303 to /ui/sessions", res.StatusCode, res.Header.Get("Location"))
	}
	res, page = b.get("/ui/sessions")
	if res.StatusCode != 200 {
		b.t.Fatalf("sessions after login: %d\n%s", res.StatusCode, page)
	}
	return field(b.t, page)
}

func TestHeadersOnEveryAnswer(t *testing.T) {
	t.Parallel()
	c := newConsole(t, false)
	b := c.browser(t)
	for _, path := range []string{"/ui/login", "/ui/sessions", "/ui/static/app.css", "/ui/static/app.js", "/ui/nothing"} {
		res, _ := b.get(path)
		h := res.Header
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'", "form-action 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: CSP %q allows inline code", path, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" || h.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", path, h)
		}
	}
	if res, body := b.get("/ui/static/app.js"); res.StatusCode != 200 || !strings.Contains(body, "use strict") {
		t.Errorf("app.js: %d", res.StatusCode)
	}
	// The pages hold no inline script or style for the CSP to block.
	_, page := b.get("/ui/login")
	if strings.Contains(page, "<script>") || strings.Contains(page, "style=") || strings.Contains(page, "onclick") {
		t.Errorf("the login page has inline code:\n%s", page)
	}
}

func TestLogin(t *testing.T) {
	t.Parallel()
	c := newConsole(t, false)

	t.Run("NoCookieGoesToLogin", func(t *testing.T) {
		res, _ := c.browser(t).get("/ui/sessions")
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/login?next=%2Fui%2Fsessions" {
			t.Errorf("got %d to %q", res.StatusCode, res.Header.Get("Location"))
		}
	})
	t.Run("WrongKey", func(t *testing.T) {
		b := c.browser(t)
		_, page := b.get("/ui/login")
		res, page := b.do("POST", "/ui/login", url.Values{"csrf": {field(t, page)}, "key": {"abk_wrong"}}, nil)
		if res.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "not valid") {
			t.Errorf("got %d:\n%s", res.StatusCode, page)
		}
		if ck := cookie(res, "agentbox_ui"); ck != nil {
			t.Errorf("a wrong key got a session cookie %v", ck)
		}
	})
	t.Run("FormWithoutItsToken", func(t *testing.T) {
		b := c.browser(t)
		b.get("/ui/login")
		res, _ := b.do("POST", "/ui/login", url.Values{"csrf": {"forged"}, "key": {adminKey}}, nil)
		if res.StatusCode != http.StatusForbidden || cookie(res, "agentbox_ui") != nil {
			t.Errorf("a login form without its token: %d", res.StatusCode)
		}
	})
	t.Run("CrossSite", func(t *testing.T) {
		b := c.browser(t)
		_, page := b.get("/ui/login")
		res, _ := b.do("POST", "/ui/login", url.Values{"csrf": {field(t, page)}, "key": {adminKey}}, http.Header{"Sec-Fetch-Site": {"cross-site"}})
		if res.StatusCode != http.StatusForbidden || cookie(res, "agentbox_ui") != nil {
			t.Errorf("a cross-site login: %d", res.StatusCode)
		}
	})
	t.Run("CookieHoldsNoKey", func(t *testing.T) {
		b := c.browser(t)
		_, page := b.get("/ui/login?next=/ui/audit")
		res, _ := b.do("POST", "/ui/login", url.Values{"csrf": {field(t, page)}, "key": {adminKey}, "next": {"/ui/audit"}}, nil)
		ck := cookie(res, "agentbox_ui")
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/audit" || ck == nil {
			t.Fatalf("login: %d to %q, cookie %v", res.StatusCode, res.Header.Get("Location"), ck)
		}
		if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui/" || ck.Secure {
			t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path /ui/, not Secure over plain HTTP", ck)
		}
		if strings.Contains(ck.Value, adminKey) || len(ck.Value) < 40 {
			t.Errorf("session cookie value %q", ck.Value)
		}
	})
	t.Run("NextStaysInside", func(t *testing.T) {
		for _, next := range []string{"https://evil.example/", "//evil.example/ui/", "/v1/sessions", "/ui/login"} {
			b := c.browser(t)
			_, page := b.get("/ui/login")
			res, _ := b.do("POST", "/ui/login", url.Values{"csrf": {field(t, page)}, "key": {adminKey}, "next": {next}}, nil)
			if loc := res.Header.Get("Location"); loc != "/ui/sessions" {
				t.Errorf("next %q: sent to %q", next, loc)
			}
		}
	})
}

func TestSecureCookieOverTLS(t *testing.T) {
	t.Parallel()
	c := newConsole(t, true)
	b := c.browser(t)
	_, page := b.get("/ui/login")
	res, _ := b.do("POST", "/ui/login", url.Values{"csrf": {field(t, page)}, "key": {adminKey}}, nil)
	if ck := cookie(res, "agentbox_ui"); ck == nil || !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		t.Errorf("session cookie over TLS: %+v", ck)
	}
}

func cookie(res *http.Response, name string) *http.Cookie {
	for _, ck := range res.Cookies() {
		if ck.Name == name && ck.MaxAge >= 0 {
			return ck
		}
	}
	return nil
}

// TestChangesNeedTheToken holds the CSRF rule on a change (logout, verify): without the cookie
// 401, with a wrong or missing token or from another site 403, and nothing changed; with both,
// done.
func TestChangesNeedTheToken(t *testing.T) {
	t.Parallel()
	c := newConsole(t, false)
	b := c.browser(t)
	token := b.login(adminKey)
	still := func(what string) {
		t.Helper()
		if res, _ := b.get("/ui/sessions"); res.StatusCode != 200 {
			t.Errorf("%s logged the person out: %d", what, res.StatusCode)
		}
	}
	for _, tc := range []struct {
		name   string
		form   url.Values
		header http.Header
		want   int
	}{
		{"NoToken", url.Values{}, nil, http.StatusForbidden},
		{"WrongToken", url.Values{"csrf": {token + "x"}}, nil, http.StatusForbidden},
		{"OtherSessionsToken", url.Values{"csrf": {c.browser(t).login(adminKey)}}, nil, http.StatusForbidden},
		{"CrossSite", url.Values{"csrf": {token}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden},
		{"OtherOrigin", url.Values{"csrf": {token}}, http.Header{"Sec-Fetch-Site": nil, "Origin": {"http://evil.example"}}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			res, page := b.do("POST", "/ui/logout", tc.form, h)
			if res.StatusCode != tc.want {
				t.Errorf("got %d, want %d:\n%s", res.StatusCode, tc.want, page)
			}
			still(tc.name)
		})
	}
	t.Run("NoCookie", func(t *testing.T) {
		anon := c.browser(t)
		res, _ := anon.do("POST", "/ui/logout", url.Values{"csrf": {token}}, nil)
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("got %d, want 401", res.StatusCode)
		}
		still("a POST without the cookie")
	})
	t.Run("TokenInHeader", func(t *testing.T) {
		res, _ := b.do("POST", "/ui/audit/verify", url.Values{}, http.Header{"X-Csrf-Token": {token}})
		if res.StatusCode != http.StatusSeeOther {
			t.Errorf("verify with the header token: %d", res.StatusCode)
		}
	})
	t.Run("Logout", func(t *testing.T) {
		res, _ := b.do("POST", "/ui/logout", url.Values{"csrf": {token}}, nil)
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/login" {
			t.Fatalf("logout: %d to %q", res.StatusCode, res.Header.Get("Location"))
		}
		if res, _ := b.get("/ui/sessions"); res.StatusCode != http.StatusSeeOther {
			t.Errorf("after logout the sessions page answered %d", res.StatusCode)
		}
	})
}

// TestTenantSeesItsOwn: a tenant's key sees its tenant's sessions, artifacts and records only,
// another tenant's are not found; a key revoked after the login ends its UI sessions at once.
func TestTenantSeesItsOwn(t *testing.T) {
	t.Parallel()
	c := newConsole(t, false)
	ctx := context.Background()
	acmeKey, acmeRec := c.tenantKey(t, "acme", auth.ScopeSessions, auth.ScopeAuditRead)
	globexKey, _ := c.tenantKey(t, "globex", auth.ScopeSessions)
	acme := c.m.As(sandbox.Caller{Tenant: "acme", Agent: "acme-agent"})
	globex := c.m.As(sandbox.Caller{Tenant: "globex", Agent: "globex-agent"})
	mine, err := acme.CreateSession(ctx, sandbox.SessionOptions{Tier: "nano"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := acme.RunInSession(ctx, mine.ID, &sandbox.RunRequest{Code: "plot()"})
	if err != nil || len(res.Artifacts) != 1 {
		t.Fatalf("run: %v %+v", err, res)
	}
	art := res.Artifacts[0].ID
	theirs, err := globex.CreateSession(ctx, sandbox.SessionOptions{Tier: "nano"})
	if err != nil {
		t.Fatal(err)
	}

	a := c.browser(t)
	a.login(acmeKey)
	_, page := a.get("/ui/sessions")
	if !strings.Contains(page, mine.ID) || strings.Contains(page, theirs.ID) {
		t.Errorf("acme's sessions page: want %s and not %s:\n%s", mine.ID, theirs.ID, page)
	}
	if r, page := a.get("/ui/sessions/" + theirs.ID); r.StatusCode != http.StatusNotFound {
		t.Errorf("acme opening globex's session: %d\n%s", r.StatusCode, page)
	}
	if r, page := a.get("/ui/sessions/" + mine.ID); r.StatusCode != 200 || !strings.Contains(page, "nano run, ok") {
		t.Errorf("acme's session page: %d\n%s", r.StatusCode, page)
	}
	r, body := a.get("/ui/artifacts/" + art)
	if r.StatusCode != 200 || r.Header.Get("Content-Type") != "image/png" || body != string(png) {
		t.Errorf("acme's artifact: %d %s", r.StatusCode, r.Header.Get("Content-Type"))
	}
	if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "sandbox") {
		t.Errorf("artifact CSP %q", csp)
	}
	_, page = a.get("/ui/audit")
	if !strings.Contains(page, mine.ID) || strings.Contains(page, theirs.ID) {
		t.Errorf("acme's audit page shows another tenant's records or not its own:\n%s", page)
	}
	if !strings.Contains(page, "Verified") || strings.Contains(page, "3 records, 1 checkpoints") {
		t.Errorf("acme's audit page: want the state without the whole log's counts:\n%s", page)
	}

	g := c.browser(t)
	g.login(globexKey)
	if r, _ := g.get("/ui/artifacts/" + art); r.StatusCode != http.StatusNotFound {
		t.Errorf("globex reading acme's artifact: %d", r.StatusCode)
	}
	if r, page := g.get("/ui/audit"); r.StatusCode != http.StatusForbidden || !strings.Contains(page, "audit-read") {
		t.Errorf("globex without audit-read on the audit page: %d\n%s", r.StatusCode, page)
	}
	if r, _ := g.get("/ui/artifacts/nope"); r.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown artifact: %d", r.StatusCode)
	}
	if r, _ := c.browser(t).get("/ui/artifacts/" + art); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("an artifact without the cookie: %d", r.StatusCode)
	}

	// The admin sees both and the whole log's counts.
	ad := c.browser(t)
	ad.login(adminKey)
	_, page = ad.get("/ui/sessions")
	if !strings.Contains(page, mine.ID) || !strings.Contains(page, theirs.ID) {
		t.Errorf("the admin's sessions page lacks a session")
	}
	if _, page := ad.get("/ui/audit"); !strings.Contains(page, "3 records, 1 checkpoints") {
		t.Errorf("the admin's audit page lacks the counts")
	}

	// Revoking acme's key ends its UI session at its next request.
	if err := auth.UpdateKeyFile(c.keys, func(recs []auth.KeyRecord) ([]auth.KeyRecord, error) {
		now := time.Now()
		for i := range recs {
			if recs[i].ID == acmeRec.ID {
				recs[i].Revoked = &now
			}
		}
		return recs, nil
	}); err != nil {
		t.Fatal(err)
	}
	if r, _ := a.get("/ui/sessions"); r.StatusCode != http.StatusSeeOther {
		t.Errorf("a revoked key's UI session answered %d", r.StatusCode)
	}
}

// TestAuditFailureShows: a verification that found tampering says so, with its problems to the
// admin.
func TestAuditFailureShows(t *testing.T) {
	t.Parallel()
	c := newConsole(t, false)
	c.check = func() webui.AuditCheck {
		return webui.AuditCheck{OK: false, Summary: "9 records; FAILED: record 3 (line 4) was altered", Problems: []string{"record 3 (line 4) was altered"}}
	}
	b := c.browser(t)
	token := b.login(adminKey)
	_, page := b.get("/ui/audit")
	if !strings.Contains(page, "FAILED") || !strings.Contains(page, "record 3 (line 4) was altered") {
		t.Errorf("audit page:\n%s", page)
	}
	_ = token
}
