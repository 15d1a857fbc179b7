package webui_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/webui"
)

// loginFrom posts a login with key from the client address addr straight to the console's
// handler (the address a server sees is the connection's, which a test over loopback cannot
// vary) and returns the answer.
func loginFrom(t *testing.T, ui http.Handler, addr, key string) *httptest.ResponseRecorder {
	t.Helper()
	get := httptest.NewRequest("GET", "/ui/login", nil)
	get.RemoteAddr = addr + ":40000"
	page := httptest.NewRecorder()
	ui.ServeHTTP(page, get)
	m := hiddenField.FindStringSubmatch(page.Body.String())
	if m == nil {
		t.Fatalf("no login form: %d %s", page.Code, page.Body.String())
	}
	post := httptest.NewRequest("POST", "/ui/login", strings.NewReader(url.Values{"csrf": {m[1]}, "key": {key}}.Encode()))
	post.RemoteAddr = addr + ":40001"
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	post.Header.Set("Sec-Fetch-Site", "same-origin")
	for _, c := range page.Result().Cookies() {
		post.AddCookie(c)
	}
	res := httptest.NewRecorder()
	ui.ServeHTTP(res, post)
	return res
}

func bareUI(t *testing.T, opts webui.Options) http.Handler {
	t.Helper()
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{
		runtimetest.NewFake(sandbox.Capabilities{Tier: "nano", Sessions: true, Contained: true})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if opts.Keys == nil {
		if opts.Keys, err = auth.NewKeys(adminKey, ""); err != nil {
			t.Fatal(err)
		}
	}
	opts.Engine, opts.Logger = m, slog.New(slog.NewTextHandler(io.Discard, nil))
	ui, err := webui.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return ui
}

// TestLoginRateLimit: failed logins are limited per client address and per key; past the limit
// even the right key gets a 429 with Retry-After until the window has moved on, and other
// addresses and keys are not held up by one guesser.
func TestLoginRateLimit(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)}
	ui := bareUI(t, webui.Options{Now: clk.Now, LoginLimit: webui.LoginLimit{PerAddress: 3, PerKey: 5, Window: time.Minute}})

	for i := range 3 {
		if res := loginFrom(t, ui, "192.0.2.1", "wrong-key-"+strconv.Itoa(i)); res.Code != http.StatusUnauthorized {
			t.Fatalf("failed login %d: %d", i+1, res.Code)
		}
		clk.add(time.Second)
	}
	res := loginFrom(t, ui, "192.0.2.1", adminKey)
	wait, err := strconv.Atoi(res.Header().Get("Retry-After"))
	if res.Code != http.StatusTooManyRequests || err != nil || wait < 1 || wait > 60 || !strings.Contains(res.Body.String(), "Too many failed logins") {
		t.Fatalf("a login after 3 failures from one address: %d, Retry-After %q\n%s", res.Code, res.Header().Get("Retry-After"), res.Body.String())
	}
	if res := loginFrom(t, ui, "192.0.2.2", adminKey); res.Code != http.StatusSeeOther {
		t.Errorf("another address's login was held up: %d", res.Code)
	}
	clk.add(time.Duration(wait) * time.Second)
	if res := loginFrom(t, ui, "192.0.2.1", adminKey); res.Code != http.StatusSeeOther {
		t.Errorf("after Retry-After the address's login: %d", res.Code)
	}

	// One key guessed at from many addresses: its prefix is limited, another key is not.
	guess := "abt_0123456789abcdef." + strings.Repeat("x", 40)
	for i := range 5 {
		if res := loginFrom(t, ui, "198.51.100."+strconv.Itoa(i), guess); res.Code != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i+1, res.Code)
		}
	}
	if res := loginFrom(t, ui, "198.51.100.99", guess); res.Code != http.StatusTooManyRequests || res.Header().Get("Retry-After") == "" {
		t.Errorf("a sixth guess at one key from a new address: %d", res.Code)
	}
	if res := loginFrom(t, ui, "198.51.100.99", adminKey); res.Code != http.StatusSeeOther {
		t.Errorf("another key from that address: %d", res.Code)
	}
}

// TestLoginsSurviveRestart: a console started again over the same file (a daemon restart) knows
// its logins, with the same CSRF tokens; the file holds neither the cookie nor the key; a logout,
// an expiry or a revoked key ends a login for the next console too.
func TestLoginsSurviveRestart(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)}
	dir := t.TempDir()
	file := filepath.Join(dir, "ui", "sessions.json")
	keysFile := filepath.Join(dir, auth.KeysFile)
	tenantKey, rec, err := auth.NewKey("acme", "acme-agent", []auth.Scope{auth.ScopeSessions}, 0, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.UpdateKeyFile(keysFile, func(rs []auth.KeyRecord) ([]auth.KeyRecord, error) { return append(rs, rec), nil }); err != nil {
		t.Fatal(err)
	}
	start := func() *httptest.Server {
		keys, err := auth.NewKeys(adminKey, keysFile)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(bareUI(t, webui.Options{Now: clk.Now, SessionsFile: file, Keys: keys, IdleTimeout: 30 * time.Minute}))
		t.Cleanup(srv.Close)
		return srv
	}
	get := func(srv *httptest.Server, cookie string) (int, string) {
		req, _ := http.NewRequest("GET", srv.URL+"/ui/sessions", nil)
		req.AddCookie(&http.Cookie{Name: "agentbox_ui", Value: cookie})
		res, err := (&http.Transport{}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	login := func(srv *httptest.Server, key string) (cookie, token string) {
		c := &console{srv: srv}
		b := c.browser(t)
		token = b.login(key)
		u, _ := url.Parse(srv.URL + "/ui/sessions")
		for _, ck := range b.http.Jar.Cookies(u) {
			if ck.Name == "agentbox_ui" {
				cookie = ck.Value
			}
		}
		if cookie == "" {
			t.Fatal("no session cookie after the login")
		}
		return cookie, token
	}

	first := start()
	admin, adminToken := login(first, adminKey)
	tenant, _ := login(first, tenantKey)
	first.Close()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("the logins file's mode is %v", fi.Mode().Perm())
	}
	for _, secret := range []string{admin, tenant, adminKey, tenantKey, adminToken} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the logins file holds a cookie, a key or a token:\n%s", b)
		}
	}

	second := start()
	code, page := get(second, admin)
	if code != http.StatusOK || field(t, page) != adminToken {
		t.Fatalf("after a restart the admin's login: %d, token kept: %v", code, code == 200 && field(t, page) == adminToken)
	}
	if code, _ := get(second, tenant); code != http.StatusOK {
		t.Fatalf("after a restart the tenant's login: %d", code)
	}
	// A logout there, the tenant's key revoked: neither login comes back with the next start.
	form := url.Values{"csrf": {adminToken}}
	req, _ := http.NewRequest("POST", second.URL+"/ui/logout", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", second.URL)
	req.AddCookie(&http.Cookie{Name: "agentbox_ui", Value: admin})
	res, err := (&http.Transport{}).RoundTrip(req)
	if err != nil || res.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout with the kept token: %v %v", res, err)
	}
	res.Body.Close()
	if err := auth.UpdateKeyFile(keysFile, func(rs []auth.KeyRecord) ([]auth.KeyRecord, error) {
		now := clk.Now()
		rs[0].Revoked = &now
		return rs, nil
	}); err != nil {
		t.Fatal(err)
	}
	second.Close()
	third := start()
	if code, _ := get(third, admin); code == http.StatusOK {
		t.Error("a login logged out before the restart is open after it")
	}
	if code, _ := get(third, tenant); code == http.StatusOK {
		t.Error("a login of a key revoked before the restart is open after it")
	}
	// Expiry counts across restarts too.
	again, _ := login(third, adminKey)
	third.Close()
	clk.add(31 * time.Minute)
	if code, _ := get(start(), again); code == http.StatusOK {
		t.Error("a login idle past its timeout across a restart is open")
	}
}
