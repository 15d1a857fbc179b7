package daemon

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/cluster"
)

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consoleClient is a browser of the web console through the gateway: a cookie jar, redirects
// shown rather than followed, a same-origin form's headers.
type consoleClient struct {
	t  *testing.T
	gw string
	hc *http.Client
}

func newConsoleClient(t *testing.T, gw string) *consoleClient {
	jar, _ := cookiejar.New(nil)
	return &consoleClient{t: t, gw: gw, hc: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *consoleClient) do(method, path string, form url.Values) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, b.gw+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.gw)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

func csrfOfPage(t *testing.T, page string) string {
	t.Helper()
	m := csrfInput.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf field in the page:\n%s", page)
	}
	return m[1]
}

// The web console through a cluster's gateway: one login serves every node; the sessions page
// lists the caller's sessions of both nodes (not another tenant's); a session's page is served by
// the node that holds it; a logout ends the login on every node.
func TestConsoleAcrossNodes(t *testing.T) {
	t.Parallel()
	c := startTestCluster(t, clusterOpts{}, "ca", "cb")
	key, other := c.tenantKey(t, "acme"), c.tenantKey(t, "umbrella")
	on := map[string]string{} // session → node
	for len(on) < 4 {
		var s struct{ ID string }
		if st, _ := call(t, c.gw, key, "POST", "/v1/sessions", `{"runtime":"toy"}`, &s); st != 201 {
			t.Fatalf("create: %d", st)
		}
		on[s.ID], _ = cluster.NodeOfSession(s.ID)
	}
	nodes := map[string]bool{}
	for _, n := range on {
		nodes[n] = true
	}
	if !nodes["ca"] || !nodes["cb"] {
		t.Fatalf("sessions went to %v, want both nodes", nodes)
	}
	var theirs struct{ ID string }
	call(t, c.gw, other, "POST", "/v1/sessions", `{"runtime":"toy"}`, &theirs)

	b := newConsoleClient(t, c.gw)
	_, page := b.do("GET", "/ui/login", nil)
	resp, _ := b.do("POST", "/ui/login", url.Values{"csrf": {csrfOfPage(t, page)}, "key": {key}, "next": {"/ui/sessions"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	resp, page = b.do("GET", "/ui/sessions", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("the sessions page: %d\n%s", resp.StatusCode, page)
	}
	for id, n := range on {
		if !strings.Contains(page, `href="/ui/sessions/`+id+`"`) {
			t.Errorf("the sessions page (served by %s) lacks a link to %s (on %s)", resp.Header.Get("Agentbox-Node"), id, n)
		}
	}
	if strings.Contains(page, theirs.ID) {
		t.Errorf("the sessions page shows another tenant's session %s", theirs.ID)
	}
	for id, n := range on {
		resp, page := b.do("GET", "/ui/sessions/"+id, nil)
		if resp.StatusCode != 200 || resp.Header.Get("Agentbox-Node") != n || !strings.Contains(page, id) {
			t.Errorf("the page of %s: %d from %q, want 200 from %s", id, resp.StatusCode, resp.Header.Get("Agentbox-Node"), n)
		}
	}
	resp, _ = b.do("GET", "/ui/sessions/"+theirs.ID, nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("another tenant's session page: %d, want 404", resp.StatusCode)
	}
	// Logout (on the stable node) ends the login on the other node too.
	csrf := csrfOfPage(t, page)
	if resp, _ := b.do("POST", "/ui/logout", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	for id := range on {
		if resp, _ := b.do("GET", "/ui/sessions/"+id, nil); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/login") {
			t.Errorf("the page of %s after the logout: %d to %q, want the login", id, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
}

// The console page of a session that moved while its node is down is served by the node that
// adopted it, not by whichever node is first healthy.
func TestConsolePageOfAMovedSession(t *testing.T) {
	t.Parallel()
	c := startTestCluster(t, clusterOpts{}, "ma", "mb", "mc")
	key := c.tenantKey(t, "acme")
	// A session on ma that mc (not mb, the first healthy node once ma is gone) takes over.
	var id string
	for range 64 {
		var s struct{ ID string }
		if st, _ := call(t, c.gw, key, "POST", "/v1/sessions", `{"runtime":"toy"}`, &s); st != 201 {
			t.Fatalf("create: %d", st)
		}
		if n, _ := cluster.NodeOfSession(s.ID); n == "ma" && cluster.Successors(s.ID, []string{"mb", "mc"})[0] == "mc" {
			id = s.ID
			break
		}
	}
	if id == "" {
		t.Fatal("no session on ma that mc would adopt in 64 tries")
	}
	c.nodes[0].kill()
	var info struct{ ID string }
	if st, _ := call(t, c.gw, key, "GET", "/v1/sessions/"+id, "", &info); st != 200 {
		t.Fatalf("the session after its node died: %d", st)
	}
	if rec, err := c.shared.Get(t.Context(), id); err != nil || rec.Owner != "mc" {
		t.Fatalf("after the move the session is owned by %q (%v), want mc", rec.Owner, err)
	}
	b := newConsoleClient(t, c.gw)
	_, page := b.do("GET", "/ui/login", nil)
	if resp, _ := b.do("POST", "/ui/login", url.Values{"csrf": {csrfOfPage(t, page)}, "key": {key}, "next": {"/ui/sessions"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	resp, page := b.do("GET", "/ui/sessions/"+id, nil)
	if resp.StatusCode != 200 || resp.Header.Get("Agentbox-Node") != "mc" || !strings.Contains(page, id) {
		t.Fatalf("the page of the moved session: %d from %q, want 200 from mc\n%s", resp.StatusCode, resp.Header.Get("Agentbox-Node"), page)
	}
}
