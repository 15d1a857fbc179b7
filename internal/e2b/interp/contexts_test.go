package interp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/e2b/interp"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// contextsFixture is a heavy session behind the code interpreter's handler.
type contextsFixture struct {
	t       *testing.T
	eng     *sandbox.View
	session string
	url     string
}

func newContextsFixture(t *testing.T, opts interp.Options) *contextsFixture {
	m := heavyManager(t)
	acme := m.As(sandbox.Caller{Tenant: "acme"})
	s, err := acme.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "heavy"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { acme.CloseSession(s.ID) })
	h := interp.New(opts)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.Serve(w, r, interp.Target{Session: s.ID, Engine: acme})
	}))
	t.Cleanup(srv.Close)
	return &contextsFixture{t: t, eng: acme, session: s.ID, url: srv.URL}
}

func (f *contextsFixture) call(method, path string, body any) (int, []byte) {
	f.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, f.url+path, rd)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, b
}

func (f *contextsFixture) create(cwd string) string {
	f.t.Helper()
	st, b := f.call(http.MethodPost, "/contexts", map[string]any{"language": "python", "cwd": cwd})
	var c struct{ ID, Cwd string }
	if json.Unmarshal(b, &c); st != 200 || c.ID == "" || c.Cwd != cwd {
		f.t.Fatalf("create a context in %s: %d %s", cwd, st, b)
	}
	return c.ID
}

// value runs code in context id ("" the default) and returns its main result's text, or the
// error's name.
func (f *contextsFixture) value(id, code string) string {
	f.t.Helper()
	body := map[string]any{"code": code}
	if id != "" {
		body["context_id"] = id
	}
	e := run(f.t, f.url, body)
	if e.err != nil {
		return e.err.Name
	}
	for _, r := range e.results {
		if r.IsMainResult {
			return r.Text
		}
	}
	return ""
}

func (f *contextsFixture) expect(id, code, want string) {
	f.t.Helper()
	if got := f.value(id, code); got != want {
		f.t.Fatalf("%q in context %q: got %q, want %q", code, id, got, want)
	}
}

// TestContextsShareFiles: two code contexts of one sandbox have their own variables and working
// directories and one file system, which the sandbox's files API and its commands see too; a
// restart clears a context's variables and keeps the files; a removed context is gone.
func TestContextsShareFiles(t *testing.T) {
	f := newContextsFixture(t, interp.Options{})
	ctx := context.Background()
	proj := f.create("/home/user/proj")

	f.expect("", "x = 'default'\nopen('shared.txt', 'w').write('written by default')\nx", "default")
	f.expect(proj, "x", "NameError")
	f.expect(proj, "import os\nos.getcwd()", "/home/user/proj")
	f.expect(proj, "open('/home/user/shared.txt').read()", "written by default")
	f.expect(proj, "y = 'proj'\nopen('note.txt', 'w').write('written by proj')\ny", "proj")
	f.expect("", "import os\nos.getcwd()", "/home/user")
	f.expect("", "y", "NameError")
	f.expect("", "x + ' ' + open('proj/note.txt').read()", "default written by proj")

	// The sandbox's files API and a command see what the context wrote.
	if b, err := f.eng.ReadFile(ctx, f.session, "/home/user/proj/note.txt"); err != nil || string(b) != "written by proj" {
		t.Fatalf("the files API: %q %v", b, err)
	}
	c, err := f.eng.RunCommand(ctx, f.session, sandbox.Command{Argv: []string{"cat", "proj/note.txt", "shared.txt"}}, nil)
	if err != nil || c.Stdout != "written by projwritten by default" {
		t.Fatalf("a command: %+v %v", c, err)
	}
	// And the context sees what the files API wrote.
	if err := f.eng.WriteFile(ctx, f.session, "/home/user/proj/api.txt", []byte("written by the API")); err != nil {
		t.Fatal(err)
	}
	f.expect(proj, "open('api.txt').read()", "written by the API")

	// Each context keeps its own working directory.
	f.expect(proj, "os.chdir('/tmp')\nos.getcwd()", "/tmp")
	f.expect("", "os.getcwd()", "/home/user")
	f.expect(proj, "os.getcwd()", "/tmp")
	// Classes a context defines are its __main__'s.
	f.expect(proj, "import pickle, dataclasses\n@dataclasses.dataclass\nclass P:\n    a: int\npickle.loads(pickle.dumps(P(3))).a", "3")

	// A restart: no variables, back in its cwd, the files kept.
	if st, b := f.call(http.MethodPost, "/contexts/"+proj+"/restart", nil); st != 200 {
		t.Fatalf("restart: %d %s", st, b)
	}
	f.expect(proj, "y", "NameError")
	f.expect(proj, "import os\nos.getcwd() + ' ' + open('note.txt').read()", "/home/user/proj written by proj")
	if e := run(t, f.url, map[string]any{"code": "1", "context_id": proj}); e.count != 3 {
		t.Fatalf("the execution count after a restart: %d, want 3", e.count)
	}
	f.expect("", "x", "default")

	// The default context restarts too.
	if st, b := f.call(http.MethodPost, "/contexts/default/restart", nil); st != 200 {
		t.Fatalf("restart the default context: %d %s", st, b)
	}
	f.expect("", "x", "NameError")
	if e := run(t, f.url, map[string]any{"code": "1"}); e.count != 2 {
		t.Fatalf("the default context's execution count after a restart: %d, want 2", e.count)
	}

	// Removed: gone from the list and from /execute; its files stay.
	if st, b := f.call(http.MethodDelete, "/contexts/"+proj, nil); st != 200 {
		t.Fatalf("remove: %d %s", st, b)
	}
	if st, _ := execute(t, f.url, map[string]any{"code": "1", "context_id": proj}); st != 404 {
		t.Fatalf("a removed context: %d", st)
	}
	_, b := f.call(http.MethodGet, "/contexts", nil)
	if strings.Contains(string(b), proj) {
		t.Fatalf("a removed context is listed: %s", b)
	}
	f.expect("", "open('proj/note.txt').read()", "written by proj")
	if st, b := f.call(http.MethodDelete, "/contexts/default", nil); st != 501 || !strings.Contains(string(b), "removeCodeContext") {
		t.Fatalf("remove the default context: %d %s", st, b)
	}

	// The steps say which context each run was in.
	steps, _, err := f.eng.Steps(f.session)
	if err != nil {
		t.Fatal(err)
	}
	inProj := 0
	for _, s := range steps {
		if s.Context != "" && strings.HasPrefix(proj, s.Context) { // the id begins with the name
			inProj++
		}
	}
	if inProj < 8 {
		t.Fatalf("%d steps in context %s", inProj, proj)
	}
	// And each run, in whichever context, is in the audit log as a run of the session, under
	// the caller's tenant.
	var recs []json.RawMessage
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if recs, err = f.eng.QueryAudit(ctx, sandbox.AuditFilter{Session: f.session, Kind: string(sandbox.AuditRun), Limit: 1000}); err == nil && len(recs) >= len(steps) {
			break
		}
	}
	if len(recs) < len(steps) || !strings.Contains(string(recs[0]), `"acme"`) {
		t.Fatalf("%d audit records of runs for %d steps (%v): %s", len(recs), len(steps), err, recs)
	}
}

// TestContextsCap: the handler refuses a context past its cap with a clear error, and the session's
// interpreter refuses one past sandbox.MaxContexts (agentbox's own API can name contexts).
func TestContextsCap(t *testing.T) {
	f := newContextsFixture(t, interp.Options{MaxContexts: 2})
	f.create(sandbox.WorkDir)
	f.create(sandbox.WorkDir)
	st, b := f.call(http.MethodPost, "/contexts", map[string]any{"language": "python"})
	if st != 409 || !strings.Contains(string(b), "2 code contexts") || !strings.Contains(string(b), "removeCodeContext") {
		t.Fatalf("a third context: %d %s", st, b)
	}

	ctx := context.Background()
	for i := 0; i < sandbox.MaxContexts; i++ {
		res, err := f.eng.RunInSession(ctx, f.session, &sandbox.RunRequest{Code: fmt.Sprintf("n = %d", i), Context: fmt.Sprintf("c%d", i)})
		if err != nil || res.Error != nil {
			t.Fatalf("context %d: %v %+v", i, err, res)
		}
	}
	_, err := f.eng.RunInSession(ctx, f.session, &sandbox.RunRequest{Code: "n = 0", Context: "one-too-many"})
	if e := sandbox.AsError(err); e == nil || e.Kind != sandbox.KindConflict || !strings.Contains(e.Message, "32 code contexts") {
		t.Fatalf("one context too many: %v", err)
	}
	// Ending one makes room; the others keep their variables.
	if _, err := f.eng.RunInSession(ctx, f.session, &sandbox.RunRequest{Context: "c0", ContextEnd: true}); err != nil {
		t.Fatal(err)
	}
	res, err := f.eng.RunInSession(ctx, f.session, &sandbox.RunRequest{Code: "n = 0\nn", Context: "one-too-many"})
	if err != nil || len(res.Outputs) != 1 || res.Outputs[0].Text != "0" {
		t.Fatalf("after ending one: %v %+v", err, res)
	}
	res, err = f.eng.RunInSession(ctx, f.session, &sandbox.RunRequest{Code: "n", Context: "c5"})
	if err != nil || len(res.Outputs) != 1 || res.Outputs[0].Text != "5" {
		t.Fatalf("c5: %v %+v", err, res)
	}
}

// TestContextsRewind: a session's steps hold all its contexts; a rewind takes each context's
// variables and working directory back to that step, and a context made after it starts afresh
// (in its cwd) at its next cell.
func TestContextsRewind(t *testing.T) {
	f := newContextsFixture(t, interp.Options{})
	a := f.create("/home/user/a")
	f.expect("", "v = 1\nv", "1")
	f.expect(a, "v = 10\nimport os\nos.chdir('/tmp')\nv", "10")
	steps, head, err := f.eng.Steps(f.session)
	if err != nil || len(steps) != 2 || steps[1].ID != head {
		t.Fatalf("steps %+v %v", steps, err)
	}
	mark := head
	f.expect("", "v = 2\nv", "2")
	f.expect(a, "v = 20\nos.chdir('/home/user')\nv", "20")
	b := f.create("/home/user/b")
	f.expect(b, "w = 'b'\nw", "b")

	var rerr error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, rerr = f.eng.Rewind(context.Background(), f.session, mark); rerr == nil || sandbox.KindOf(rerr) != sandbox.KindConflict {
			break
		}
	}
	if rerr != nil {
		t.Fatalf("rewind: %v", rerr)
	}
	f.expect("", "v", "1")
	f.expect(a, "import os\n(v, os.getcwd())", "(10, '/tmp')")
	f.expect(b, "w", "NameError")
	f.expect(b, "import os\nos.getcwd()", "/home/user/b")
}

// TestContextsOneShot: contexts are a session's; a one-shot run naming one is refused, and so is
// a bad name.
func TestContextsRequests(t *testing.T) {
	m := heavyManager(t)
	acme := m.As(sandbox.Caller{Tenant: "acme"})
	ctx := context.Background()
	if _, err := acme.Run(ctx, &sandbox.RunRequest{Code: "1", Context: "a"}); sandbox.KindOf(err) != sandbox.KindInvalidRequest {
		t.Fatalf("a one-shot run in a context: %v", err)
	}
	s, err := acme.CreateSession(ctx, sandbox.SessionOptions{Tier: "heavy"})
	if err != nil {
		t.Fatal(err)
	}
	defer acme.CloseSession(s.ID)
	for _, req := range []sandbox.RunRequest{
		{Code: "1", Context: "a/b"},
		{Code: "1", Context: strings.Repeat("a", 65)},
		{Code: "1", ContextEnd: true},
		{Code: "1", Context: "a", ContextDir: "../x"},
		{Context: "a"},
	} {
		if _, err := acme.RunInSession(ctx, s.ID, &req); sandbox.KindOf(err) != sandbox.KindInvalidRequest {
			t.Errorf("%+v: %v", req, err)
		}
	}
	// A tier without contexts says so.
	n, err := acme.CreateSession(ctx, sandbox.SessionOptions{Tier: "nano"})
	if err != nil {
		t.Fatal(err)
	}
	defer acme.CloseSession(n.ID)
	if _, err := acme.RunInSession(ctx, n.ID, &sandbox.RunRequest{Code: "1", Context: "a"}); sandbox.KindOf(err) != sandbox.KindNotImplemented {
		t.Fatalf("a context in a nano session: %v", err)
	}
}

// TestContextsOutliveTheHandler: a context's id says what it is, so a handler that did not make
// it (the daemon restarted; the sandbox lived on) knows it again, with the variables and cwd the
// sandbox's interpreter kept; a removed context stays unknown, and so does an id that is not one.
func TestContextsOutliveTheHandler(t *testing.T) {
	f := newContextsFixture(t, interp.Options{})
	kept := f.create("/home/user/kept")
	gone := f.create(sandbox.WorkDir)
	f.expect(kept, "v = 1\nv", "1")
	if st, b := f.call(http.MethodDelete, "/contexts/"+gone, nil); st != 200 {
		t.Fatalf("remove: %d %s", st, b)
	}

	h2 := interp.New(interp.Options{})
	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h2.Serve(w, r, interp.Target{Session: f.session, Engine: f.eng})
	}))
	t.Cleanup(srv2.Close)
	f2 := &contextsFixture{t: t, eng: f.eng, session: f.session, url: srv2.URL}
	f2.expect(kept, "import os\n(v, os.getcwd())", "(1, '/home/user/kept')")
	if _, b := f2.call(http.MethodGet, "/contexts", nil); !strings.Contains(string(b), kept) || !strings.Contains(string(b), `"cwd":"/home/user/kept"`) {
		t.Fatalf("the context known again is not listed with its cwd: %s", b)
	}
	if st, _ := execute(t, f.url, map[string]any{"code": "1", "context_id": gone}); st != 404 {
		t.Fatalf("a removed context: %d", st)
	}
	for _, id := range []string{"ctx-nothex0000000000", "ctx-0123", kept + "x", "ctx-0123456789abcdef.ruby.Lw", "ctx-0123456789abcdef.python.Li4v"} {
		if st, _ := execute(t, srv2.URL, map[string]any{"code": "1", "context_id": id}); st != 404 {
			t.Fatalf("id %q: %d, want 404", id, st)
		}
	}
}
