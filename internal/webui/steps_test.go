package webui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/audit"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// memTier is a tier whose sessions keep variables in a map and snapshot, rewind and fork by
// copying it: enough of the time-travel contract for the console's pages, which are about the
// code around the tier. Code is lines "name = value"; a line "plot" makes a PNG figure; the core's
// inspection script prints the variables as that script would; a line "table" displays a
// DataFrame's HTML, and a line "fetch" makes a request out, which egress records in the audit log
// while the run is in progress, as the egress gateway does. With contexts set, its sessions have
// code contexts (a run's variables are its context's).
type memTier struct {
	egress   func(session string)
	contexts bool
}

type memSession struct {
	mu     sync.Mutex
	id     string
	egress func(session string)
	vars   map[string]string
	snaps  map[string]map[string]string
}

// Interface guards.
var (
	_ sandbox.Runtime     = memTier{}
	_ sandbox.Snapshotter = (*memSession)(nil)
)

func (t memTier) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Tier: "nano", Sessions: true, Contained: true, Snapshot: true, Rewind: true, Fork: true, Contexts: t.contexts}
}

func (memTier) Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	return newMemSession(nil).Run(ctx, req)
}

func (t memTier) NewSession(_ context.Context, opts sandbox.SessionOptions) (sandbox.Session, error) {
	s := newMemSession(nil)
	s.id, s.egress = opts.ID, t.egress
	return s, nil
}

func (memTier) Close() error { return nil }

func newMemSession(vars map[string]string) *memSession {
	if vars == nil {
		vars = map[string]string{}
	}
	return &memSession{vars: vars, snaps: map[string]map[string]string{}}
}

func (s *memSession) Run(_ context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.Contains(req.Code, "_agentbox_inspect") {
		type v struct {
			Name string `json:"name"`
			Type string `json:"type"`
			Size int64  `json:"size"`
			Repr string `json:"repr"`
		}
		out := struct {
			Variables []v   `json:"variables"`
			Files     []any `json:"files"`
		}{Files: []any{}}
		for _, k := range sortedKeys(s.vars) {
			c, name, ok := strings.Cut(k, "/") // a context's variable is kept as "context/name"
			if !ok {
				c, name = "", k
			}
			if c == req.Context {
				out.Variables = append(out.Variables, v{Name: name, Type: "int", Size: 28, Repr: s.vars[k]})
			}
		}
		b, _ := json.Marshal(out)
		return &sandbox.Result{Stdout: string(b)}, nil
	}
	res := &sandbox.Result{}
	for _, line := range strings.Split(req.Code, "\n") {
		if name, val, ok := strings.Cut(line, "="); ok {
			name = strings.TrimSpace(name)
			if req.Context != "" {
				name = req.Context + "/" + name
			}
			s.vars[name] = strings.TrimSpace(val)
		}
		switch strings.TrimSpace(line) {
		case "plot":
			res.Artifacts = append(res.Artifacts, sandbox.Artifact{Name: "figure-1.png", MIME: "image/png", Content: png})
		case "table":
			res.Outputs = append(res.Outputs, sandbox.Output{Text: "   a\n0  1", HTML: tableHTML})
		case "fetch":
			if s.egress != nil {
				s.egress(s.id)
			}
		}
	}
	res.Stdout = fmt.Sprintf("vars: %d\n", len(s.vars))
	return res, nil
}

func (s *memSession) Close() error { return nil }

func (s *memSession) Snapshot(_ context.Context, step string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snaps[step] = maps.Clone(s.vars)
	return nil
}

func (s *memSession) Persist(context.Context, string) (sandbox.SnapshotRef, error) {
	return sandbox.SnapshotRef{}, nil // kept in memory only
}

func (s *memSession) Rewind(_ context.Context, step, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, ok := s.snaps[step]
	if !ok {
		return sandbox.Errorf(sandbox.KindConflict, "no snapshot of %s", step)
	}
	s.vars = maps.Clone(snap)
	return nil
}

func (s *memSession) Fork(_ context.Context, step, _ string, _ sandbox.SessionOptions) (sandbox.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, ok := s.snaps[step]
	if !ok {
		return nil, sandbox.Errorf(sandbox.KindConflict, "no snapshot of %s", step)
	}
	return newMemSession(maps.Clone(snap)), nil
}

func (s *memSession) Forget(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.snaps, step)
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// tableHTML is what pandas displays for a DataFrame, with markup a page must not run.
const tableHTML = `<table class="dataframe"><tr><th></th><th>a</th></tr><tr><th>0</th><td>1</td></tr></table><script>parent.document.title="owned"</script>`

var stepLink = regexp.MustCompile(`href="/ui/sessions/(sb_[0-9a-f]+)/steps/(st_[^"]+)"`)

// stepsOf returns the step ids the timeline links to, in order, without repeats.
func stepsOf(page string) []string {
	if i := strings.Index(page, `<ol class="steps">`); i >= 0 {
		page = page[i:]
	}
	var out []string
	seen := map[string]bool{}
	for _, m := range stepLink.FindAllStringSubmatch(page, -1) {
		if !seen[m[2]] {
			seen[m[2]] = true
			out = append(out, m[2])
		}
	}
	return out
}

// TestStepPages walks a session's steps as a person does: the timeline, a step with its figure,
// variables and the diff with its parent, a rewind (refused without the token, done with it), the
// branch the next run opens, and a fork.
func TestStepPages(t *testing.T) {
	t.Parallel()
	var c *console
	ctx := context.Background()
	c = newConsoleOf(t, memTier{egress: func(session string) {
		// A request the run made through the egress gateway, recorded as it would be.
		if err := c.log.Append(ctx, audit.Record{Kind: audit.KindEgress, Session: session, Tenant: "acme", Decision: "deny",
			Egress: &audit.Egress{Method: "GET", URL: "https://exfil.example/", Decision: "denied", Reason: "not on the allowlist"}}); err != nil {
			t.Error(err)
		}
	}})
	acmeKey, _ := c.tenantKey(t, "acme", auth.ScopeSessions, auth.ScopeAuditRead)
	globexKey, _ := c.tenantKey(t, "globex", auth.ScopeSessions)
	acme := c.m.As(sandbox.Caller{Tenant: "acme", Agent: "acme-agent"})
	s, err := acme.CreateSession(ctx, sandbox.SessionOptions{Tier: "nano"})
	if err != nil {
		t.Fatal(err)
	}
	for i, code := range []string{"x = 1", "y = 2\nplot\nfetch\ntable", "x = 3"} {
		if _, err := acme.RunInSession(ctx, s.ID, &sandbox.RunRequest{Code: code}); err != nil {
			t.Fatal(err)
		}
		if i == 1 { // written between the runs, while step 2's window in time was still open
			if err := c.log.Append(ctx, audit.Record{Kind: audit.KindEgress, Session: s.ID, Tenant: "acme", Decision: "deny",
				Egress: &audit.Egress{Method: "GET", URL: "https://between.example/", Decision: "denied", Reason: "not on the allowlist"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	steps, _, err := acme.Steps(s.ID)
	if err != nil || len(steps) != 3 {
		t.Fatalf("steps: %v %v", steps, err)
	}
	// A step names its records by id: step 2's egress, then its run's own.
	if ids := steps[1].AuditRecords; len(ids) != 2 || ids[0] >= ids[1] || len(steps[0].AuditRecords) != 1 || len(steps[2].AuditRecords) != 1 {
		t.Fatalf("the steps' audit record ids: %v %v %v", steps[0].AuditRecords, ids, steps[2].AuditRecords)
	}
	if recs, err := acme.QueryAudit(ctx, sandbox.AuditFilter{Session: s.ID, Seqs: steps[1].AuditRecords}); err != nil || len(recs) != 2 ||
		!strings.Contains(string(recs[0]), "exfil.example") || !strings.Contains(string(recs[1]), `"kind":"run"`) {
		t.Fatalf("step 2's records by id: %s %v", recs, err)
	}
	b := c.browser(t)
	token := b.login(acmeKey)

	_, page := b.get("/ui/sessions/" + s.ID)
	if got := stepsOf(page); len(got) != 3 || got[0] != steps[0].ID || got[2] != steps[2].ID {
		t.Fatalf("the timeline links %v, want the 3 steps in order:\n%s", got, page)
	}
	if strings.Contains(page, "lane-1") {
		t.Errorf("a timeline without a branch has a second lane")
	}

	res, page := b.get("/ui/sessions/" + s.ID + "/steps/" + steps[1].ID)
	if res.StatusCode != 200 {
		t.Fatalf("step page: %d\n%s", res.StatusCode, page)
	}
	art := steps[1].Artifacts[0].ID
	for _, want := range []string{`<img src="/ui/artifacts/` + art + `"`, `id="variables"`, `<td class="mono">y</td>`, "plot",
		`<li class="add"><span class="sign">+</span> <span class="mono">y</span>`, "vars: 2"} {
		if !strings.Contains(page, want) {
			t.Errorf("step 2's page lacks %q", want)
		}
	}
	if n := strings.Count(page, `<span class="kind">run</span>`); n != 1 || !strings.Contains(page, "GET https://exfil.example/ → denied") {
		t.Errorf("step 2's page shows %d run records (want its own one), or not its egress record", n)
	}
	if _, page3 := b.get("/ui/sessions/" + s.ID + "/steps/" + steps[2].ID); strings.Contains(page3, "exfil.example") {
		t.Errorf("step 3's page shows step 2's egress record")
	}
	if strings.Contains(page, "between.example") {
		t.Errorf("step 2's page shows a record written after its run")
	}
	// The DataFrame it displayed, as a notebook shows it: in a sandboxed frame of its own, whose
	// document may run nothing.
	frame := "/ui/sessions/" + s.ID + "/steps/" + steps[1].ID + "/outputs/0"
	if !strings.Contains(page, `<iframe class="output" sandbox src="`+frame+`"`) {
		t.Errorf("step 2's page does not frame its displayed table:\n%s", page)
	}
	if strings.Contains(page, "<script>parent") {
		t.Errorf("the step page carries the output's markup itself")
	}
	res, out := b.get(frame)
	csp := res.Header.Get("Content-Security-Policy")
	if res.StatusCode != 200 || !strings.Contains(out, `<table class="dataframe">`) || !strings.Contains(csp, "sandbox") ||
		!strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") || res.Header.Get("X-Frame-Options") != "SAMEORIGIN" {
		t.Errorf("the output's document: %d %q %q\n%s", res.StatusCode, csp, res.Header.Get("X-Frame-Options"), out)
	}
	if res, _ := b.get("/ui/sessions/" + s.ID + "/steps/" + steps[0].ID + "/outputs/0"); res.StatusCode != http.StatusNotFound {
		t.Errorf("an output step 1 did not display: %d", res.StatusCode)
	}
	if strings.Contains(page, `<span class="mono">x</span>`) {
		t.Errorf("step 2's diff lists x, which step 2 did not change:\n%s", page)
	}

	// Rewind needs the token; without it nothing moves.
	rewind := "/ui/sessions/" + s.ID + "/rewind"
	if res, _ := b.do("POST", rewind, url.Values{"step": {steps[0].ID}}, nil); res.StatusCode != http.StatusForbidden {
		t.Errorf("a rewind without the token: %d", res.StatusCode)
	}
	if info, _ := acme.Session(s.ID); info.Head != steps[2].ID {
		t.Errorf("the refused rewind moved the head to %s", info.Head)
	}
	g := c.browser(t)
	g.login(globexKey)
	gtoken := field(t, func() string { _, p := g.get("/ui/sessions"); return p }())
	if res, _ := g.do("POST", rewind, url.Values{"csrf": {gtoken}, "step": {steps[0].ID}}, nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("another tenant's rewind: %d", res.StatusCode)
	}
	if res, _ := g.get("/ui/sessions/" + s.ID + "/steps/" + steps[1].ID); res.StatusCode != http.StatusNotFound {
		t.Errorf("another tenant's step page: %d", res.StatusCode)
	}
	if res, _ := g.get(frame); res.StatusCode != http.StatusNotFound {
		t.Errorf("another tenant's step output: %d", res.StatusCode)
	}
	res, _ = b.do("POST", rewind, url.Values{"csrf": {token}, "step": {steps[0].ID}}, nil)
	if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/sessions/"+s.ID+"?done=") {
		t.Fatalf("rewind: %d to %q", res.StatusCode, loc)
	}
	if info, _ := acme.Session(s.ID); info.Head != steps[0].ID {
		t.Errorf("after the rewind the head is %s, want %s", info.Head, steps[0].ID)
	}
	if res, _ := b.do("POST", rewind, url.Values{"csrf": {token}, "step": {"st_nope"}}, nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("a rewind to no step: %d", res.StatusCode)
	}

	// The next run opens a branch from step 1: a second lane.
	if _, err := acme.RunInSession(ctx, s.ID, &sandbox.RunRequest{Code: "z = 9"}); err != nil {
		t.Fatal(err)
	}
	_, page = b.get("/ui/sessions/" + s.ID)
	if !strings.Contains(page, `class="lane-1 head"`) || len(stepsOf(page)) != 4 {
		t.Errorf("the timeline after a rewind and a run has no branch:\n%s", page)
	}

	// A fork from step 2 is a new session of acme's, whose page shows.
	res, _ = b.do("POST", "/ui/sessions/"+s.ID+"/fork", url.Values{"csrf": {token}, "step": {steps[1].ID}}, nil)
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/sessions/sb_") || strings.HasPrefix(loc, "/ui/sessions/"+s.ID) {
		t.Fatalf("fork: %d to %q", res.StatusCode, loc)
	}
	forked := strings.TrimPrefix(loc[:strings.Index(loc, "?")], "/ui/sessions/")
	if res, page := b.get(loc); res.StatusCode != 200 || !strings.Contains(page, "forked from") {
		t.Errorf("the forked session's page: %d", res.StatusCode)
	}
	if info, err := acme.Session(forked); err != nil || info.Tenant != "acme" {
		t.Errorf("the fork: %+v %v", info, err)
	}
}

// TestLongTimeline: a session with more steps than a page draws shows the latest and says how
// many it left out.
func TestLongTimeline(t *testing.T) {
	t.Parallel()
	c := newConsoleOf(t, memTier{})
	ctx := context.Background()
	v := c.m.As(sandbox.Caller{Admin: true})
	s, err := v.CreateSession(ctx, sandbox.SessionOptions{Tier: "nano"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 505 {
		if _, err := v.RunInSession(ctx, s.ID, &sandbox.RunRequest{Code: fmt.Sprintf("x = %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	b := c.browser(t)
	b.login(adminKey)
	res, page := b.get("/ui/sessions/" + s.ID)
	if res.StatusCode != 200 || len(stepsOf(page)) != 500 || !strings.Contains(page, "The 5 oldest steps are not drawn") ||
		!strings.Contains(page, "#505") || strings.Contains(page, `<span class="seq">#5</span>`) {
		t.Errorf("a 505-step session's page: %d, %d steps drawn", res.StatusCode, len(stepsOf(page)))
	}
}

// TestStepContexts: the step page of a session whose runs used code contexts names the contexts
// the step has (those made up to it) and shows the variables and the diff of the one picked:
// by default the context the step ran in, ?context= another (empty: the main one). A context the
// step does not have, or a name that is none, is the core's typed error on the page with its
// status, never a 500; the names are escaped; another tenant still sees nothing.
func TestStepContexts(t *testing.T) {
	t.Parallel()
	c := newConsoleOf(t, memTier{contexts: true})
	ctx := context.Background()
	acmeKey, _ := c.tenantKey(t, "acme", auth.ScopeSessions)
	globexKey, _ := c.tenantKey(t, "globex", auth.ScopeSessions)
	acme := c.m.As(sandbox.Caller{Tenant: "acme", Agent: "acme-agent"})
	s, err := acme.CreateSession(ctx, sandbox.SessionOptions{Tier: "nano"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range []sandbox.RunRequest{{Code: "m = 1"}, {Code: "a = first", Context: "alpha"}, {Code: "a = second", Context: "alpha"},
		{Code: "b = 3", Context: "beta.2"}, {Code: "m = 4"}} {
		res, err := acme.RunInSession(ctx, s.ID, &r)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Step)
	}
	b := c.browser(t)
	b.login(acmeKey)
	page := func(step, query string, want int) string {
		t.Helper()
		res, p := b.get("/ui/sessions/" + s.ID + "/steps/" + step + query)
		if res.StatusCode != want {
			t.Fatalf("step %s%s: %d, want %d\n%s", step, query, res.StatusCode, want, p)
		}
		return p
	}
	vars := func(p string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`<tr><td class="mono">([^<]*)</td>`).FindAllStringSubmatch(p, -1) {
			out = append(out, m[1])
		}
		return out
	}
	link := func(step, c string) string {
		return `href="/ui/sessions/` + s.ID + `/steps/` + step + `?context=` + c + `" data-context="` + c + `"`
	}

	// The timeline tags the steps that ran in a context with its name.
	if _, p := b.get("/ui/sessions/" + s.ID); strings.Count(p, `<span class="tag ctx" title="ran in code context alpha">alpha</span>`) != 2 ||
		strings.Count(p, `class="tag ctx"`) != 3 {
		t.Errorf("the timeline does not tag the steps' contexts:\n%s", p)
	}
	// Step 1 ran in the main context and no context exists yet: no choice to offer.
	if p := page(ids[0], "", 200); strings.Contains(p, `id="contexts"`) || !slices.Equal(vars(p), []string{"m"}) {
		t.Errorf("step 1: contexts offered, or variables %v", vars(p))
	}
	// Step 2 made alpha and ran there: alpha is shown, and was made here (no diff to read).
	p := page(ids[1], "", 200)
	if !strings.Contains(p, link(ids[1], "")) || !strings.Contains(p, link(ids[1], "alpha")+` class="on" aria-current="page">alpha</a>`) ||
		strings.Contains(p, "beta.2") || !slices.Equal(vars(p), []string{"a"}) || !strings.Contains(p, `<code class="repr">first</code>`) ||
		!strings.Contains(p, `id="context-new"`) || !strings.Contains(p, `<dt>Code context</dt><dd class="mono">alpha</dd>`) {
		t.Errorf("step 2's page (variables %v):\n%s", vars(p), p)
	}
	// Step 3 changed alpha: its diff with step 2 is in alpha.
	p = page(ids[2], "", 200)
	if !slices.Equal(vars(p), []string{"a"}) || !strings.Contains(p, `<li class="chg"><span class="sign">~</span> <span class="mono">a</span>`) ||
		!strings.Contains(p, `<code class="repr">second</code>`) {
		t.Errorf("step 3's page in alpha (variables %v):\n%s", vars(p), p)
	}
	// Step 4 has both contexts; the main one is picked with an empty ?context=.
	p = page(ids[3], "", 200)
	if !strings.Contains(p, link(ids[3], "alpha")) || !strings.Contains(p, link(ids[3], "beta.2")+` class="on"`) || !slices.Equal(vars(p), []string{"b"}) {
		t.Errorf("step 4's page (variables %v):\n%s", vars(p), p)
	}
	p = page(ids[3], "?context=", 200)
	if !strings.Contains(p, link(ids[3], "")+` class="on" aria-current="page">(main)</a>`) || !slices.Equal(vars(p), []string{"m"}) ||
		!strings.Contains(p, `<code class="repr">1</code>`) {
		t.Errorf("step 4 in the main context (variables %v):\n%s", vars(p), p)
	}
	p = page(ids[3], "?context=alpha", 200)
	if !slices.Equal(vars(p), []string{"a"}) || !strings.Contains(p, `<code class="repr">second</code>`) ||
		!strings.Contains(p, "No variable or file changed.") {
		t.Errorf("step 4 in alpha (variables %v):\n%s", vars(p), p)
	}
	// Step 5 ran in the main context: that is the default, with the two contexts offered.
	p = page(ids[4], "", 200)
	if !slices.Equal(vars(p), []string{"m"}) || !strings.Contains(p, `<code class="repr">4</code>`) || !strings.Contains(p, link(ids[4], "beta.2")) ||
		!strings.Contains(p, `<li class="chg"><span class="sign">~</span> <span class="mono">m</span>`) {
		t.Errorf("step 5's page (variables %v):\n%s", vars(p), p)
	}

	// A context the step does not have: the typed error, with the contexts it has, as a 404.
	p = page(ids[1], "?context=beta.2", http.StatusNotFound)
	if !strings.Contains(p, "has no code context &#34;beta.2&#34;") || !strings.Contains(p, "contexts up to that step: alpha") || strings.Contains(p, `id="variables"`) {
		t.Errorf("step 2 in a context made later:\n%s", p)
	}
	// A name that is none: invalid, escaped, never markup of its own.
	p = page(ids[3], "?context="+url.QueryEscape(`<b>x</b>`), http.StatusBadRequest)
	if strings.Contains(p, "<b>x</b>") || !strings.Contains(p, "is not a context name") {
		t.Errorf("a context that is no name:\n%s", p)
	}

	// Another tenant sees no step, whatever the context.
	g := c.browser(t)
	g.login(globexKey)
	if res, _ := g.get("/ui/sessions/" + s.ID + "/steps/" + ids[3] + "?context=alpha"); res.StatusCode != http.StatusNotFound {
		t.Errorf("another tenant's step in a context: %d", res.StatusCode)
	}
}
