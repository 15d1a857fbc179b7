package webui_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/webui"
)

// clock is a settable time for the UI sessions' expiry.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// consoleWith is a bare console (a fake tier, no audit log) with opts.
func consoleWith(t *testing.T, opts webui.Options) *console {
	t.Helper()
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{
		runtimetest.NewFake(sandbox.Capabilities{Tier: "nano", Sessions: true, Contained: true})}})
	if err != nil {
		t.Fatal(err)
	}
	a := sandbox.WithAudit(m, nil)
	t.Cleanup(func() { a.Close() })
	keys, err := auth.NewKeys(adminKey, "")
	if err != nil {
		t.Fatal(err)
	}
	opts.Engine, opts.Keys, opts.Logger = a, keys, slog.New(slog.NewTextHandler(io.Discard, nil))
	ui, err := webui.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	c := &console{m: a, srv: httptest.NewServer(ui)}
	t.Cleanup(c.srv.Close)
	return c
}

// TestUISessionsEnd: a UI session ends after its idle time, at its maximum age whatever its use,
// and the oldest goes when the table is full.
func TestUISessionsEnd(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)}
	c := consoleWith(t, webui.Options{Now: clk.Now, IdleTimeout: 10 * time.Minute, MaxAge: time.Hour, MaxSessions: 2})
	loggedIn := func(b *browser) bool {
		res, _ := b.get("/ui/sessions")
		return res.StatusCode == http.StatusOK
	}

	idle := c.browser(t)
	idle.login(adminKey)
	clk.add(9 * time.Minute)
	if !loggedIn(idle) {
		t.Fatal("a UI session used 9 minutes ago ended")
	}
	clk.add(11 * time.Minute)
	if loggedIn(idle) {
		t.Error("a UI session idle for 11 minutes (bound 10) is still open")
	}

	busy := c.browser(t)
	busy.login(adminKey)
	for range 6 { // 54 minutes of use, 9 idle at most
		clk.add(9 * time.Minute)
		if !loggedIn(busy) {
			t.Fatal("a UI session in use ended before its maximum age")
		}
	}
	clk.add(9 * time.Minute) // 63 minutes since the login
	if loggedIn(busy) {
		t.Error("a UI session older than its maximum age (1 h) is still open")
	}

	first, second, third := c.browser(t), c.browser(t), c.browser(t)
	first.login(adminKey)
	clk.add(time.Second)
	second.login(adminKey)
	clk.add(time.Second)
	third.login(adminKey)
	if loggedIn(first) || !loggedIn(second) || !loggedIn(third) {
		t.Error("with room for 2 UI sessions, the third login did not end the least recently used")
	}
}

// ExampleUI shows the console's promise about changes: a POST that changes something is done only
// with the UI session's cookie and its CSRF token, never on the cookie alone.
func ExampleUI() {
	m, _ := sandbox.NewManager(sandbox.ManagerOptions{Runtimes: []sandbox.Runtime{
		runtimetest.NewFake(sandbox.Capabilities{Tier: "nano", Sessions: true})}})
	defer m.Close()
	keys, _ := auth.NewKeys("example-admin-key", "")
	ui, _ := webui.New(webui.Options{Engine: m, Keys: keys, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv := httptest.NewServer(ui)
	defer srv.Close()
	post := func(path string, form url.Values, cookies []*http.Cookie) *http.Response {
		req, _ := http.NewRequestWithContext(context.Background(), "POST", srv.URL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for _, c := range cookies {
			req.AddCookie(c)
		}
		res, _ := (&http.Transport{}).RoundTrip(req)
		res.Body.Close()
		return res
	}
	// Log in: the login form's token travels in a cookie and a field.
	page, _ := http.Get(srv.URL + "/ui/login")
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	token := hiddenField.FindStringSubmatch(string(body))[1]
	res := post("/ui/login", url.Values{"csrf": {token}, "key": {"example-admin-key"}}, page.Cookies())
	session := res.Cookies()
	fmt.Println("login:", res.StatusCode)

	fmt.Println("logout without the cookie:", post("/ui/logout", url.Values{}, nil).StatusCode)
	fmt.Println("logout with the cookie, without the token:", post("/ui/logout", url.Values{}, session).StatusCode)
	fmt.Println("logout with a wrong token:", post("/ui/logout", url.Values{"csrf": {"guess"}}, session).StatusCode)
	// Output:
	// login: 303
	// logout without the cookie: 401
	// logout with the cookie, without the token: 403
	// logout with a wrong token: 403
}

// Logins kept in a directory the nodes share (Options.SharedLogins) that are never used again are
// swept: a node removes the files of logins past their idle time or maximum age, and keeps those
// in use on any node.
func TestSharedLoginsSwept(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)}
	dir := t.TempDir()
	opts := webui.Options{Now: clk.Now, IdleTimeout: 10 * time.Minute, MaxAge: 24 * time.Hour, SharedLogins: dir}
	c1, c2 := consoleWith(t, opts), consoleWith(t, opts)
	files := func() int {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	abandoned, elsewhere := c1.browser(t), c2.browser(t)
	abandoned.login(adminKey)
	elsewhere.login(adminKey)
	if files() != 2 {
		t.Fatalf("%d login files after two logins", files())
	}
	clk.add(9 * time.Minute)
	if res, _ := elsewhere.get("/ui/sessions"); res.StatusCode != http.StatusOK {
		t.Fatal("a login in use on its node ended")
	}
	clk.add(3 * time.Minute) // the abandoned login idle 12 minutes, the other 3
	fresh := c1.browser(t)
	fresh.login(adminKey)
	if files() != 2 {
		t.Fatalf("%d login files after the sweep, want 2 (the abandoned one removed)", files())
	}
	for name, b := range map[string]*browser{"in use on another node": elsewhere, "just made": fresh} {
		b.c = c1
		if res, _ := b.get("/ui/sessions"); res.StatusCode != http.StatusOK {
			t.Errorf("the login %s was swept", name)
		}
	}
}
