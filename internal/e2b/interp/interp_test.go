package interp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/e2b/interp"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// msg is one NDJSON line of /execute, with the fields the SDK reads.
type msg struct {
	Type           string
	Text           string
	HTML           string
	PNG            string
	Data           map[string][]any
	JSON           map[string]any
	Chart          map[string]any
	IsMainResult   bool `json:"is_main_result"`
	Name, Value    string
	Traceback      string
	ExecutionCount int `json:"execution_count"`
}

// execution is what the SDK builds from the lines.
type execution struct {
	count          int
	stdout, stderr []string
	results        []msg
	err            *msg
	ended          bool
}

func execute(t *testing.T, url string, body map[string]any) (int, *execution) {
	t.Helper()
	b, _ := json.Marshal(body)
	r, err := http.Post(url+"/execute", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if r.StatusCode != 200 {
		return r.StatusCode, nil
	}
	e := &execution{}
	sc := bufio.NewScanner(r.Body)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m msg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%v in %q", err, sc.Text())
		}
		switch m.Type {
		case "number_of_executions":
			e.count = m.ExecutionCount
		case "stdout":
			e.stdout = append(e.stdout, m.Text)
		case "stderr":
			e.stderr = append(e.stderr, m.Text)
		case "result":
			e.results = append(e.results, m)
		case "error":
			e.err = &m
		case "end_of_execution":
			e.ended = true
		default:
			t.Fatalf("unknown line %q", sc.Text())
		}
	}
	if !e.ended {
		t.Fatalf("no end_of_execution: %+v", e)
	}
	return 200, e
}

func run(t *testing.T, url string, body map[string]any) *execution {
	t.Helper()
	st, e := execute(t, url, body)
	if st != 200 {
		t.Fatalf("status %d", st)
	}
	return e
}

// TestExecute runs cells through /execute over a real heavy session: streamed output, a
// DataFrame and a matplotlib figure as results, an error with its traceback, kept state, the
// execution count, bash, a language agentbox does not run, and contexts.
func TestExecute(t *testing.T) {
	m := heavyManager(t)
	acme := m.As(sandbox.Caller{Tenant: "acme"})
	s, err := acme.CreateSession(context.Background(), sandbox.SessionOptions{Tier: "heavy"})
	if err != nil {
		t.Fatal(err)
	}
	h := interp.New(interp.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.Serve(w, r, interp.Target{Session: s.ID, Engine: acme})
	}))
	t.Cleanup(srv.Close)

	t.Run("StreamAndState", func(t *testing.T) {
		e := run(t, srv.URL, map[string]any{"code": "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.2)\na = 5"})
		if e.count != 1 || strings.Join(e.stdout, "") != "0\n1\n2\n" || len(e.stdout) < 2 || e.err != nil || len(e.results) != 0 {
			t.Fatalf("got %+v", e)
		}
		e = run(t, srv.URL, map[string]any{"code": "a * 2"})
		if e.count != 2 || len(e.results) != 1 || e.results[0].Text != "10" || !e.results[0].IsMainResult {
			t.Fatalf("got %+v", e)
		}
		e = run(t, srv.URL, map[string]any{"code": "'quoted'"})
		if e.results[0].Text != "quoted" {
			t.Fatalf("a string's text: %+v", e.results)
		}
	})

	t.Run("DataFrameAndFigure", func(t *testing.T) {
		e := run(t, srv.URL, map[string]any{"code": "import pandas as pd, matplotlib.pyplot as plt\n" +
			"df = pd.DataFrame({'x': [1, 2, 3], 'y': [4, 5, 6]})\nplt.plot(df.x, df.y)\nplt.show()\ndf"})
		if e.err != nil {
			t.Fatalf("error %+v", e.err)
		}
		var png, main *msg
		for i := range e.results {
			switch r := &e.results[i]; {
			case r.PNG != "":
				png = r
			case r.IsMainResult:
				main = r
			}
		}
		if png == nil || main == nil {
			t.Fatalf("results %+v", e.results)
		}
		if b, err := base64.StdEncoding.DecodeString(png.PNG); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) || png.IsMainResult {
			t.Fatalf("the figure is not a PNG result: %v %q", err, png.PNG[:min(20, len(png.PNG))])
		}
		if !strings.Contains(main.HTML, "<table") || !strings.Contains(main.Text, "x  y") || len(main.Data["x"]) != 3 || main.Data["y"][2] != float64(6) {
			t.Fatalf("the DataFrame: %+v", main)
		}
	})

	t.Run("Error", func(t *testing.T) {
		e := run(t, srv.URL, map[string]any{"code": "import sys\nprint('before', file=sys.stderr)\n1/0"})
		if e.err == nil || e.err.Name != "ZeroDivisionError" || e.err.Value != "division by zero" || !strings.Contains(e.err.Traceback, "ZeroDivisionError") {
			t.Fatalf("error %+v", e.err)
		}
		if got := strings.Join(e.stderr, ""); got != "before\n" {
			t.Fatalf("stderr %q: the traceback goes in the error only", got)
		}
	})

	t.Run("Languages", func(t *testing.T) {
		e := run(t, srv.URL, map[string]any{"code": "echo hi; exit 2", "language": "bash"})
		// As E2B's bash kernel reports a non-zero exit: no name, the status as the value.
		if strings.Join(e.stdout, "") != "hi\n" || e.err == nil || e.err.Name != "" || e.err.Value != "2" {
			t.Fatalf("bash: %+v %+v", e, e.err)
		}
		e = run(t, srv.URL, map[string]any{"code": "1", "language": "r"})
		if e.err == nil || e.err.Name != "NotImplementedError" || !strings.Contains(e.err.Value, `"r"`) {
			t.Fatalf("r: %+v", e.err)
		}
		if st, _ := execute(t, srv.URL, map[string]any{"code": "1", "language": "python", "context_id": "default"}); st != 400 {
			t.Fatalf("context and language: %d", st)
		}
	})

	t.Run("Contexts", func(t *testing.T) {
		post := func(path string, body any) (*http.Response, []byte) {
			b, _ := json.Marshal(body)
			r, err := http.Post(srv.URL+path, "application/json", bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			buf.ReadFrom(r.Body)
			r.Body.Close()
			return r, buf.Bytes()
		}
		r, b := post("/contexts", map[string]any{"language": "python", "cwd": "/tmp/work"})
		var c struct{ ID, Language, Cwd string }
		if json.Unmarshal(b, &c); r.StatusCode != 200 || c.ID == "" || c.Cwd != "/tmp/work" || c.Language != "python" {
			t.Fatalf("create: %d %s", r.StatusCode, b)
		}
		e := run(t, srv.URL, map[string]any{"code": "import os\nb = 1\nos.getcwd()", "context_id": c.ID})
		if e.count != 1 || len(e.results) != 1 || e.results[0].Text != "/tmp/work" {
			t.Fatalf("in the context: %+v", e)
		}
		if e := run(t, srv.URL, map[string]any{"code": "b"}); e.err == nil || e.err.Name != "NameError" {
			t.Fatalf("the default context sees the other's variable: %+v", e)
		}
		lr, err := http.Get(srv.URL + "/contexts")
		if err != nil {
			t.Fatal(err)
		}
		var list []struct{ ID string }
		json.NewDecoder(lr.Body).Decode(&list)
		lr.Body.Close()
		if len(list) != 2 || list[0].ID != "default" || list[1].ID != c.ID {
			t.Fatalf("list: %+v", list)
		}
		if r, _ := post("/contexts/"+c.ID+"/restart", nil); r.StatusCode != 200 {
			t.Fatalf("restart: %d", r.StatusCode)
		}
		if e := run(t, srv.URL, map[string]any{"code": "b", "context_id": c.ID}); e.err == nil || e.err.Name != "NameError" {
			t.Fatalf("after restart: %+v", e)
		}
		if r, b := post("/contexts/default/restart", nil); r.StatusCode != 200 {
			t.Fatalf("restart of the default context: %d %s", r.StatusCode, b)
		}
		if e := run(t, srv.URL, map[string]any{"code": "a"}); e.err == nil || e.err.Name != "NameError" || e.count != 1 {
			t.Fatalf("the default context after its restart: %+v %+v", e, e.err)
		}
		req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/contexts/"+c.ID, nil)
		dr, err := http.DefaultClient.Do(req)
		if err != nil || dr.StatusCode != 200 {
			t.Fatalf("remove: %v %v", dr, err)
		}
		dr.Body.Close()
		if st, _ := execute(t, srv.URL, map[string]any{"code": "1", "context_id": c.ID}); st != 404 {
			t.Fatalf("a removed context: %d", st)
		}
		if r, _ := post("/contexts", map[string]any{"language": "javascript"}); r.StatusCode != 501 {
			t.Fatalf("a javascript context: %d", r.StatusCode)
		}
	})
}
