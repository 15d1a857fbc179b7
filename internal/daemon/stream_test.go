package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
)

// ticker prints a line every 100 ms for 2 s.
const ticker = "import time\nfor i in range(20):\n    print('tick', i, flush=True)\n    time.sleep(0.1)\n"

// firstChunk streams a run and reports when its first stdout chunk came and when the run ended,
// both from the request's start, with every stdout chunk and the result.
func firstChunk(t *testing.T, c *client.Client, req api.RunRequest, session string) (first, total time.Duration, out string, res *api.Result) {
	t.Helper()
	start := time.Now()
	on := func(ev api.StreamEvent) {
		if ev.Type == api.EventStdout {
			if first == 0 {
				first = time.Since(start)
			}
			out += ev.Text
		}
	}
	var err error
	if session != "" {
		res, err = c.RunInSessionStream(context.Background(), session, req, on)
	} else {
		res, err = c.RunStream(context.Background(), req, on)
	}
	total = time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	return first, total, out, res
}

// checkStreamed holds the promise: the first line arrives long before the 2 s run ends (a
// generous bound that still proves the output was not held to the end), every line is streamed
// once, and the result still has them all.
func checkStreamed(t *testing.T, first, total time.Duration, out string, res *api.Result, tier string) {
	t.Helper()
	t.Logf("%s: first chunk after %v, run took %v", tier, first, total)
	if res.Runtime != tier {
		t.Fatalf("ran in %s, want %s", res.Runtime, tier)
	}
	if out != res.Stdout || strings.Count(out, "tick") != 20 {
		t.Fatalf("streamed %q, result %q", out, res.Stdout)
	}
	// The lines are printed over 1.9 s from the code's start: a first chunk that came 1.5 s or
	// more before the end came within about 0.4 s of its print (a cold start before the code
	// runs counts on both sides).
	if first == 0 || total < 2*time.Second || total-first < 1500*time.Millisecond {
		t.Fatalf("first chunk after %v of a %v run: not streamed", first, total)
	}
}

func TestStreamNano(t *testing.T) {
	c, url := start(t)
	t.Run("OneShot", func(t *testing.T) {
		first, total, out, res := firstChunk(t, c, api.RunRequest{Code: ticker, Runtime: "nano", Timeout: 20}, "")
		checkStreamed(t, first, total, out, res, "nano")
	})
	t.Run("Session", func(t *testing.T) {
		s, err := c.CreateSession(context.Background(), api.CreateSessionRequest{Runtime: "nano"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseSession(context.Background(), s.ID)
		first, total, out, res := firstChunk(t, c, api.RunRequest{Code: ticker, Timeout: 20}, s.ID)
		checkStreamed(t, first, total, out, res, "nano")
	})
	t.Run("ServerSentEvents", func(t *testing.T) {
		body := `{"code": "import sys\nprint('out')\nprint('err', file=sys.stderr)\n1/0", "runtime": "nano"}`
		req, _ := http.NewRequest("POST", url+"/v1/run", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
			t.Fatalf("status %d, content type %q", resp.StatusCode, ct)
		}
		var names []string
		var last api.StreamEvent
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			if name, ok := strings.CutPrefix(line, "event: "); ok {
				names = append(names, name)
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				last = api.StreamEvent{}
				if err := json.Unmarshal([]byte(data), &last); err != nil || last.Type != names[len(names)-1] {
					t.Fatalf("data %q of event %q: %v", data, names[len(names)-1], err)
				}
			}
		}
		names = slices.Compact(names) // stderr may come in more than one chunk
		if got := strings.Join(names, ","); got != "stdout,stderr,result" {
			t.Fatalf("events %s", got)
		}
		if last.Result == nil || last.Result.Error == nil || last.Result.Error.Name != "ZeroDivisionError" || last.Result.Stdout != "out\n" {
			t.Fatalf("result %+v", last.Result)
		}
	})
	t.Run("ErrorBeforeAnyOutput", func(t *testing.T) {
		// A run refused before it streamed anything gets its usual status and error body.
		_, err := c.RunStream(context.Background(), api.RunRequest{Code: "print(1)", Runtime: "nano", Packages: []string{"pandas"}}, nil)
		var e *client.Error
		if !asError(err, &e) || e.Status != 400 || e.Code != api.CodeInvalidRequest {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("TimeoutAfterOutput", func(t *testing.T) {
		var got string
		_, err := c.RunStream(context.Background(), api.RunRequest{Code: "import time\nprint('before', flush=True)\ntime.sleep(30)", Runtime: "nano", Timeout: 1},
			func(ev api.StreamEvent) {
				if ev.Type == api.EventStdout {
					got += ev.Text
				}
			})
		var e *client.Error
		if !asError(err, &e) || e.Code != api.CodeTimeout || e.Result == nil || e.Result.Stdout != "before\n" || got != "before\n" {
			t.Fatalf("got %v, streamed %q", err, got)
		}
	})
}

func TestStreamHeavy(t *testing.T) {
	c := startHeavy(t)
	t.Run("OneShot", func(t *testing.T) {
		first, total, out, res := firstChunk(t, c, api.RunRequest{Code: ticker, Runtime: "heavy", Timeout: 30}, "")
		checkStreamed(t, first, total, out, res, "heavy")
	})
	t.Run("Session", func(t *testing.T) {
		s, err := c.CreateSession(context.Background(), api.CreateSessionRequest{Runtime: "heavy"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseSession(context.Background(), s.ID)
		first, total, out, res := firstChunk(t, c, api.RunRequest{Code: ticker, Timeout: 30}, s.ID)
		checkStreamed(t, first, total, out, res, "heavy")
	})
	t.Run("ArtifactAsItAppears", func(t *testing.T) {
		// A figure shown in the middle of a run arrives as an artifact event before the code's
		// later output, stored once: the result lists the same artifact.
		code := "import time\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3]); plt.show()\n" +
			"time.sleep(1)\nprint('after the figure', flush=True)\n"
		var order []string
		var art *api.Artifact
		res, err := c.RunStream(context.Background(), api.RunRequest{Code: code, Runtime: "heavy", Timeout: 60}, func(ev api.StreamEvent) {
			order = append(order, ev.Type)
			if ev.Type == api.EventArtifact {
				art = ev.Artifact
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if art == nil || len(res.Artifacts) != 1 || res.Artifacts[0].ID != art.ID || art.MIME != "image/png" || !slices.Equal(order, []string{"artifact", "stdout"}) {
			t.Fatalf("events %v, streamed %+v, result's %+v", order, art, res.Artifacts)
		}
		b, _, err := c.Artifact(context.Background(), art.ID)
		if err != nil || len(b) != int(art.Size) {
			t.Fatalf("artifact %s: %d bytes, %v", art.ID, len(b), err)
		}
	})
	t.Run("FallbackDoesNotRepeat", func(t *testing.T) {
		// Auto routes this to nano (the import is hidden from the router); nano prints the first
		// line, meets pandas and the run is retried in heavy, which prints it again: the stream
		// carries it once.
		code := "print('first', flush=True)\nname = 'pan' + 'das'\npd = __import__(name)\nprint('second')\n"
		var out string
		res, err := c.RunStream(context.Background(), api.RunRequest{Code: code, Timeout: 60}, func(ev api.StreamEvent) {
			if ev.Type == api.EventStdout {
				out += ev.Text
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("routing %v", res.Routing.Reasons)
		if res.Runtime != "heavy" || out != "first\nsecond\n" || res.Stdout != out {
			t.Fatalf("runtime %s, streamed %q, result %q", res.Runtime, out, res.Stdout)
		}
	})
}

func asError(err error, e **client.Error) bool {
	ce, ok := err.(*client.Error)
	if ok {
		*e = ce
	}
	return ok
}
