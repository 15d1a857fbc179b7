package envd_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/e2b/envd"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// rpc is a Connect client as E2B's JS SDK is one: JSON messages, envelopes for streams.
type rpc struct {
	t   *testing.T
	url string
}

// unary calls method with req and decodes the answer into resp; it returns the HTTP status and,
// on an error, the Connect error's code and message.
func (c rpc) unary(method string, req, resp any) (int, string, string) {
	c.t.Helper()
	b, _ := json.Marshal(req)
	r, err := http.Post(c.url+"/"+method, "application/json", bytes.NewReader(b))
	if err != nil {
		c.t.Fatal(err)
	}
	defer r.Body.Close()
	body, _ := io.ReadAll(r.Body)
	if r.StatusCode != http.StatusOK {
		var e struct{ Code, Message string }
		if err := json.Unmarshal(body, &e); err != nil {
			c.t.Fatalf("%s: status %d, body %q is not a Connect error", method, r.StatusCode, body)
		}
		return r.StatusCode, e.Code, e.Message
	}
	if resp != nil {
		if err := json.Unmarshal(body, resp); err != nil {
			c.t.Fatalf("%s: %v in %q", method, err, body)
		}
	}
	return r.StatusCode, "", ""
}

// streamMsg is one envelope of a streaming answer.
type streamMsg struct {
	end  bool
	body json.RawMessage
}

// stream calls a server-streaming method and returns its envelopes as they come, and a cancel
// that leaves the call.
func (c rpc) stream(method string, req any, header http.Header) (<-chan streamMsg, context.CancelFunc) {
	c.t.Helper()
	b, _ := json.Marshal(req)
	env := make([]byte, 5, 5+len(b))
	binary.BigEndian.PutUint32(env[1:], uint32(len(b)))
	env = append(env, b...)
	ctx, cancel := context.WithCancel(context.Background())
	hr, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url+"/"+method, bytes.NewReader(env))
	hr.Header.Set("Content-Type", "application/connect+json")
	for k, v := range header {
		hr.Header[k] = v
	}
	r, err := http.DefaultClient.Do(hr)
	if err != nil {
		c.t.Fatal(err)
	}
	if r.StatusCode != http.StatusOK || r.Header.Get("Content-Type") != "application/connect+json" {
		c.t.Fatalf("%s: status %d, %s", method, r.StatusCode, r.Header.Get("Content-Type"))
	}
	out := make(chan streamMsg, 64)
	go func() {
		defer close(out)
		defer r.Body.Close()
		for {
			var h [5]byte
			if _, err := io.ReadFull(r.Body, h[:]); err != nil {
				return
			}
			m := make([]byte, binary.BigEndian.Uint32(h[1:]))
			if _, err := io.ReadFull(r.Body, m); err != nil {
				return
			}
			out <- streamMsg{end: h[0]&2 != 0, body: m}
		}
	}()
	return out, cancel
}

// event is a ProcessEvent as the SDK reads it.
type event struct {
	Event struct {
		Start *struct{ Pid uint32 }
		Data  *struct{ Stdout, Stderr []byte }
		End   *struct {
			ExitCode int32
			Exited   bool
			Status   string
			Error    *string
		}
		Keepalive *struct{}
	}
}

// process collects a process stream: its pid, output and end, or the stream's error.
type process struct {
	pid            uint32
	stdout, stderr string
	end            *struct {
		ExitCode int32
		Exited   bool
		Status   string
		Error    *string
	}
	err string
}

// read reads ch until the stream ends, or until until says stop.
func read(t *testing.T, ch <-chan streamMsg, until func(*process) bool) *process {
	t.Helper()
	p := &process{}
	timeout := time.After(90 * time.Second)
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				return p
			}
			if m.end {
				var e struct {
					Error *struct{ Code, Message string }
				}
				_ = json.Unmarshal(m.body, &e)
				if e.Error != nil {
					p.err = e.Error.Code + ": " + e.Error.Message
				}
				return p
			}
			var ev event
			if err := json.Unmarshal(m.body, &ev); err != nil {
				t.Fatalf("%v in %s", err, m.body)
			}
			switch e := ev.Event; {
			case e.Start != nil:
				p.pid = e.Start.Pid
			case e.Data != nil:
				p.stdout += string(e.Data.Stdout)
				p.stderr += string(e.Data.Stderr)
			case e.End != nil:
				p.end = e.End
			}
			if until != nil && until(p) {
				return p
			}
		case <-timeout:
			t.Fatalf("the stream did not end: %+v", p)
		}
	}
}

func startReq(cmd string, stdin bool) map[string]any {
	return map[string]any{"process": map[string]any{"cmd": "/bin/bash", "args": []string{"-l", "-c", cmd}}, "stdin": stdin}
}

func sel(pid uint32) map[string]any { return map[string]any{"pid": pid} }

// TestEnvd serves envd's protocol over a real heavy session: commands (foreground, background,
// reattach, stdin, kill, list), the filesystem service, /files and /health, the calls answered
// not implemented, and another tenant's caller, who finds nothing.
func TestEnvd(t *testing.T) {
	m := heavyManager(t)
	acme := m.As(sandbox.Caller{Tenant: "acme"})
	ctx := context.Background()
	s, err := acme.CreateSession(ctx, sandbox.SessionOptions{Tier: "heavy"})
	if err != nil {
		t.Fatal(err)
	}
	h := envd.New(envd.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := r.Header.Get("X-Test-Tenant")
		if tenant == "" {
			tenant = "acme"
		}
		h.Serve(w, r, envd.Target{Session: s.ID, Engine: m.As(sandbox.Caller{Tenant: tenant})})
	}))
	t.Cleanup(srv.Close)
	c := rpc{t, srv.URL}

	t.Run("StartForeground", func(t *testing.T) {
		ch, cancel := c.stream("process.Process/Start", startReq("echo hi; pwd; echo oops >&2; exit 3", false), nil)
		defer cancel()
		p := read(t, ch, nil)
		if p.err != "" || p.pid == 0 || p.stdout != "hi\n/home/user\n" || p.stderr != "oops\n" {
			t.Fatalf("got %+v", p)
		}
		if p.end == nil || p.end.ExitCode != 3 || !p.end.Exited || p.end.Error == nil || *p.end.Error != "exit status 3" {
			t.Fatalf("end %+v", p.end)
		}
	})

	t.Run("BackgroundStdinReattach", func(t *testing.T) {
		// Started with stdin open, the client leaves at once: the process goes on.
		ch, cancel := c.stream("process.Process/Start", startReq("echo ready; cat", true), nil)
		p := read(t, ch, func(p *process) bool { return p.stdout == "ready\n" })
		cancel()
		var list struct {
			Processes []struct {
				Pid    uint32
				Config struct {
					Cmd  string
					Args []string
				}
			}
		}
		if st, code, msg := c.unary("process.Process/List", struct{}{}, &list); st != 200 {
			t.Fatalf("list: %s %s", code, msg)
		}
		found := false
		for _, q := range list.Processes {
			found = found || (q.Pid == p.pid && q.Config.Cmd == "/bin/bash" && strings.Join(q.Config.Args, " ") == "-l -c echo ready; cat")
		}
		if !found {
			t.Fatalf("pid %d not in %+v", p.pid, list)
		}
		// Reattached, the client gets what comes from now on.
		ch, cancel = c.stream("process.Process/Connect", map[string]any{"process": sel(p.pid)}, nil)
		defer cancel()
		if st, code, msg := c.unary("process.Process/SendInput", map[string]any{"process": sel(p.pid), "input": map[string]any{"stdin": []byte("hello\n")}}, nil); st != 200 {
			t.Fatalf("send input: %s %s", code, msg)
		}
		q := read(t, ch, func(p *process) bool { return strings.Contains(p.stdout, "hello\n") })
		if q.pid != p.pid || q.stdout != "hello\n" {
			t.Fatalf("connect got %+v", q)
		}
		if st, code, msg := c.unary("process.Process/CloseStdin", map[string]any{"process": sel(p.pid)}, nil); st != 200 {
			t.Fatalf("close stdin: %s %s", code, msg)
		}
		q = read(t, ch, nil)
		if q.end == nil || q.end.ExitCode != 0 || q.err != "" {
			t.Fatalf("after closing stdin: %+v", q)
		}
	})

	t.Run("Kill", func(t *testing.T) {
		ch, cancel := c.stream("process.Process/Start", startReq("sleep 100", false), http.Header{"Keepalive-Ping-Interval": {"1"}})
		defer cancel()
		p := read(t, ch, func(p *process) bool { return p.pid != 0 })
		if st, code, msg := c.unary("process.Process/SendSignal", map[string]any{"process": sel(p.pid), "signal": "SIGNAL_SIGKILL"}, nil); st != 200 {
			t.Fatalf("kill: %s %s", code, msg)
		}
		p = read(t, ch, nil)
		if p.end == nil || p.end.Exited || p.end.ExitCode != -1 || p.end.Error == nil {
			t.Fatalf("killed: %+v", p.end)
		}
		// Killing it again is not found (the SDK's kill() then answers false).
		if st, code, _ := c.unary("process.Process/SendSignal", map[string]any{"process": sel(p.pid), "signal": "SIGNAL_SIGKILL"}, nil); st != 404 || code != "not_found" {
			t.Fatalf("second kill: %d %s", st, code)
		}
	})

	t.Run("Files", func(t *testing.T) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		for name, content := range map[string]string{"/home/user/dir/a.txt": "alpha", "dir/sub/b.txt": "beta"} {
			w, _ := mw.CreateFormFile("file", name)
			w.Write([]byte(content))
		}
		mw.Close()
		r, err := http.Post(srv.URL+"/files", mw.FormDataContentType(), &body)
		if err != nil {
			t.Fatal(err)
		}
		var up []struct{ Path, Name, Type string }
		json.NewDecoder(r.Body).Decode(&up)
		r.Body.Close()
		if r.StatusCode != 200 || len(up) != 2 || up[1].Path != "/home/user/dir/sub/b.txt" && up[0].Path != "/home/user/dir/sub/b.txt" {
			t.Fatalf("upload: %d %+v", r.StatusCode, up)
		}
		r, err = http.Get(srv.URL + "/files?path=dir/sub/b.txt")
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != 200 || string(got) != "beta" {
			t.Fatalf("read: %d %q", r.StatusCode, got)
		}
		r, _ = http.Get(srv.URL + "/files?path=/home/user/nope.txt")
		r.Body.Close()
		if r.StatusCode != 404 {
			t.Fatalf("read of a missing file: %d", r.StatusCode)
		}
		r, _ = http.Post(srv.URL+"/files?path=raw.bin", "application/octet-stream", strings.NewReader("raw"))
		r.Body.Close()
		if b, err := acme.ReadFile(ctx, s.ID, "/home/user/raw.bin"); r.StatusCode != 200 || err != nil || string(b) != "raw" {
			t.Fatalf("octet-stream upload: %d %q %v", r.StatusCode, b, err)
		}
		// A file over the session's file cap is refused before it is all read.
		big := m.Policy().MaxFileBytes + 1
		r, err = http.Post(srv.URL+"/files?path=big.bin", "application/octet-stream", io.LimitReader(zeros{}, big))
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != 400 || !strings.Contains(string(msg), "max_file_bytes") {
			t.Fatalf("a file over the cap: %d %s", r.StatusCode, msg)
		}
	})

	t.Run("Filesystem", func(t *testing.T) {
		type entry struct {
			Name, Type, Path, Size, Permissions, ModifiedTime string
		}
		var st struct{ Entry entry }
		if code, e, msg := c.unary("filesystem.Filesystem/Stat", map[string]any{"path": "dir/a.txt"}, &st); code != 200 {
			t.Fatalf("stat: %s %s", e, msg)
		}
		if st.Entry.Type != "FILE_TYPE_FILE" || st.Entry.Size != "5" || st.Entry.Path != "/home/user/dir/a.txt" || st.Entry.Name != "a.txt" || st.Entry.ModifiedTime == "" {
			t.Fatalf("stat: %+v", st.Entry)
		}
		var ls struct{ Entries []entry }
		c.unary("filesystem.Filesystem/ListDir", map[string]any{"path": "/home/user/dir", "depth": 1}, &ls)
		if len(ls.Entries) != 2 || ls.Entries[0].Name != "a.txt" || ls.Entries[1].Type != "FILE_TYPE_DIRECTORY" {
			t.Fatalf("list depth 1: %+v", ls.Entries)
		}
		c.unary("filesystem.Filesystem/ListDir", map[string]any{"path": "/home/user/dir", "depth": 2}, &ls)
		if len(ls.Entries) != 3 {
			t.Fatalf("list depth 2: %+v", ls.Entries)
		}
		if code, e, msg := c.unary("filesystem.Filesystem/MakeDir", map[string]any{"path": "made/deep"}, &st); code != 200 || st.Entry.Type != "FILE_TYPE_DIRECTORY" {
			t.Fatalf("mkdir: %s %s %+v", e, msg, st)
		}
		if code, e, _ := c.unary("filesystem.Filesystem/MakeDir", map[string]any{"path": "made/deep"}, nil); code != 409 || e != "already_exists" {
			t.Fatalf("mkdir of an existing dir: %d %s", code, e)
		}
		if code, e, msg := c.unary("filesystem.Filesystem/Move", map[string]any{"source": "dir/a.txt", "destination": "moved/a2.txt"}, &st); code != 200 || st.Entry.Path != "/home/user/moved/a2.txt" {
			t.Fatalf("move: %s %s %+v", e, msg, st)
		}
		if code, e, _ := c.unary("filesystem.Filesystem/Stat", map[string]any{"path": "dir/a.txt"}, nil); code != 404 || e != "not_found" {
			t.Fatalf("stat of a moved file: %d %s", code, e)
		}
		if code, e, msg := c.unary("filesystem.Filesystem/Remove", map[string]any{"path": "moved"}, nil); code != 200 {
			t.Fatalf("remove: %s %s", e, msg)
		}
		if code, e, _ := c.unary("filesystem.Filesystem/Stat", map[string]any{"path": "moved/a2.txt"}, nil); code != 404 || e != "not_found" {
			t.Fatalf("stat of a removed file: %d %s", code, e)
		}
	})

	t.Run("Watcher", func(t *testing.T) {
		var w struct{ WatcherID string }
		if code, e, msg := c.unary("filesystem.Filesystem/CreateWatcher", map[string]any{"path": "dir", "recursive": true}, &w); code != 200 || w.WatcherID == "" {
			t.Fatalf("create watcher: %s %s", e, msg)
		}
		if err := acme.WriteFile(ctx, s.ID, "/home/user/dir/new.txt", []byte("x")); err != nil {
			t.Fatal(err)
		}
		var ev struct{ Events []struct{ Name, Type string } }
		c.unary("filesystem.Filesystem/GetWatcherEvents", map[string]any{"watcherId": w.WatcherID}, &ev)
		if len(ev.Events) != 1 || ev.Events[0].Name != "new.txt" || ev.Events[0].Type != "EVENT_TYPE_CREATE" {
			t.Fatalf("events: %+v", ev)
		}
		if code, _, _ := c.unary("filesystem.Filesystem/RemoveWatcher", map[string]any{"watcherId": w.WatcherID}, nil); code != 200 {
			t.Fatal("remove watcher")
		}
		if code, e, _ := c.unary("filesystem.Filesystem/GetWatcherEvents", map[string]any{"watcherId": w.WatcherID}, nil); code != 404 || e != "not_found" {
			t.Fatalf("events of a removed watcher: %d %s", code, e)
		}
		// WatchDir streams the same events.
		ch, cancel := c.stream("filesystem.Filesystem/WatchDir", map[string]any{"path": "dir"}, nil)
		defer cancel()
		first := <-ch
		if !strings.Contains(string(first.body), `"start"`) {
			t.Fatalf("first watch message: %s", first.body)
		}
		if err := acme.RemoveFile(ctx, s.ID, "/home/user/dir/new.txt"); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-ch:
			if !strings.Contains(string(m.body), `"EVENT_TYPE_REMOVE"`) || !strings.Contains(string(m.body), `"new.txt"`) {
				t.Fatalf("watch event: %s", m.body)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no watch event")
		}
	})

	t.Run("NotImplemented", func(t *testing.T) {
		code, e, msg := c.unary("process.Process/Update", map[string]any{"process": sel(1), "pty": map[string]any{"size": map[string]any{"cols": 80, "rows": 24}}}, nil)
		if code != 501 || e != "unimplemented" || !strings.Contains(msg, "process.Process/Update") {
			t.Fatalf("update: %d %s %s", code, e, msg)
		}
		req := startReq("ls", false)
		req["pty"] = map[string]any{"size": map[string]any{"cols": 80, "rows": 24}}
		ch, cancel := c.stream("process.Process/Start", req, nil)
		defer cancel()
		if p := read(t, ch, nil); !strings.HasPrefix(p.err, "unimplemented: ") || !strings.Contains(p.err, "pty") {
			t.Fatalf("pty: %+v", p)
		}
		r, _ := http.Get(srv.URL + "/metrics")
		r.Body.Close()
		if r.StatusCode != 501 {
			t.Fatalf("/metrics: %d", r.StatusCode)
		}
		r, _ = http.Get(srv.URL + "/health")
		r.Body.Close()
		if r.StatusCode != 204 {
			t.Fatalf("/health: %d", r.StatusCode)
		}
	})

	t.Run("RootRefused", func(t *testing.T) {
		ch, cancel := c.stream("process.Process/Start", startReq("id", false), http.Header{"Authorization": {"Basic cm9vdDo="}})
		defer cancel()
		if p := read(t, ch, nil); !strings.HasPrefix(p.err, "permission_denied: ") {
			t.Fatalf("root: %+v", p)
		}
	})

	t.Run("OtherTenant", func(t *testing.T) {
		other := rpc{t, srv.URL}
		hdr := http.Header{"X-Test-Tenant": {"other"}}
		ch, cancel := other.stream("process.Process/Start", startReq("echo no", false), hdr)
		defer cancel()
		if p := read(t, ch, nil); !strings.HasPrefix(p.err, "not_found: ") || p.stdout != "" {
			t.Fatalf("another tenant's start: %+v", p)
		}
		hr, _ := http.NewRequest(http.MethodGet, srv.URL+"/files?path=dir/sub/b.txt", nil)
		hr.Header = hdr
		r, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != 404 {
			t.Fatalf("another tenant's read: %d", r.StatusCode)
		}
		hr, _ = http.NewRequest(http.MethodPost, srv.URL+"/filesystem.Filesystem/ListDir", strings.NewReader(`{"path":"/home/user"}`))
		hr.Header = hdr.Clone()
		hr.Header.Set("Content-Type", "application/json")
		r, err = http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != 404 {
			t.Fatalf("another tenant's list: %d", r.StatusCode)
		}
	})
}
