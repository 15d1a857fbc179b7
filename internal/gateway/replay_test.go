package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/gateway"
)

// runBody is a run's JSON body of exactly size bytes.
func runBody(size int) string {
	head, tail := `{"code":"`, `"}`
	return head + strings.Repeat("x", size-len(head)-len(tail)) + tail
}

// A placed request whose first node refuses the connection is sent to the next node when its
// body is at most ReplayLimit (the gateway kept it); a larger body was streamed to the first node
// and is not sent again: the answer says the node did not answer, and no other node got it.
func TestBodyResentOnlyWithinReplayLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		size   int
		resent bool
	}{{gateway.ReplayLimit, true}, {gateway.ReplayLimit + 1, false}} {
		// Placement's first choice is a (b has no warm sandbox), and no poll after the first
		// sees that it is gone.
		c := newClusterWith(t, time.Hour, func(n []*fakeNode) { n[1].setWarm("nano", "default", 0) }, "a", "b")
		c.nodes[0].srv.Close()
		var out struct{ Node string }
		var e errorBody
		body := runBody(tc.size)
		if tc.resent {
			if st := c.do(t, clientKey, "POST", "/v1/run", body, &out); st != 200 || out.Node != "b" {
				t.Errorf("a %d-byte run with its first node gone: %d on %q, want 200 on b", tc.size, st, out.Node)
			}
			continue
		}
		if st := c.do(t, clientKey, "POST", "/v1/run", body, &e); st != 503 || e.Error.Code != "runtime_unavailable" {
			t.Errorf("a %d-byte run with its first node gone: %d %+v, want 503 runtime_unavailable", tc.size, st, e)
		}
		if n := c.nodes[1].runs.Load(); n != 0 {
			t.Errorf("a %d-byte body was sent again, to b (%d runs)", tc.size, n)
		}
	}
}

// A body larger than ReplayLimit streams through the gateway to the session's node once: the node
// reads past the limit while the client is still sending (nothing waits for the whole body), and
// a session whose node is gone is not moved for it (the body could not be sent again).
func TestLargeBodyStreamsThroughOnce(t *testing.T) {
	t.Parallel()
	// No poll after the first: the gateway learns that a is gone from the request that finds it.
	c := newClusterWith(t, time.Hour, nil, "a", "b")
	a := c.nodes[0]
	sid := cluster.SessionPrefix("a") + "f11e"
	a.mu.Lock()
	a.sessions[sid] = true
	a.mu.Unlock()
	const total = 3 << 20
	for _, known := range []bool{false, true} { // chunked, and with a Content-Length
		pr, pw := io.Pipe()
		req, _ := http.NewRequest("PUT", c.srv.URL+"/v1/sessions/"+sid+"/files/content?path=big.bin", pr)
		req.Header.Set("Authorization", "Bearer "+clientKey)
		if known {
			req.ContentLength = total
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		type answer struct {
			status int
			body   []byte
			err    error
		}
		done := make(chan answer, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req.WithContext(ctx))
			if err != nil {
				done <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			done <- answer{status: resp.StatusCode, body: b}
		}()
		chunk := make([]byte, 64<<10)
		sent := 0
		for sent < gateway.ReplayLimit+len(chunk) {
			n, err := pw.Write(chunk)
			if err != nil {
				t.Fatal(err)
			}
			sent += n
		}
		// The node has read past the limit while the rest is still with the client.
		for deadline := time.Now().Add(30 * time.Second); a.uploaded.Load() <= gateway.ReplayLimit; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("known length %v: the node read %d bytes of %d sent: the gateway holds the body back", known, a.uploaded.Load(), sent)
			}
		}
		for sent < total {
			n, _ := pw.Write(chunk[:min(len(chunk), total-sent)])
			sent += n
		}
		pw.Close()
		ans := <-done
		cancel()
		var out struct {
			Node  string
			Bytes int64
		}
		if ans.err != nil || ans.status != 200 || json.Unmarshal(ans.body, &out) != nil || out.Node != "a" || out.Bytes != total {
			t.Fatalf("known length %v: %v %d %s, want 200 from a with %d bytes", known, ans.err, ans.status, ans.body, total)
		}
	}
	if n := a.uploads.Load(); n != 2 {
		t.Errorf("the node got %d uploads for 2 requests", n)
	}

	// Its node gone: a large body streamed to it is not sent elsewhere, and the session is not
	// adopted for it; the gateway now knows the node is down.
	a.srv.Close()
	b := c.nodes[1]
	upload := func() (int, string) {
		req, _ := http.NewRequest("PUT", c.srv.URL+"/v1/sessions/"+sid+"/files/content?path=big.bin", strings.NewReader(strings.Repeat("y", gateway.ReplayLimit+1)))
		req.Header.Set("Authorization", "Bearer "+clientKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	adopts := func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.adopts)
	}
	if st, body := upload(); st != 503 || adopts() != 0 || b.uploads.Load() != 0 {
		t.Errorf("a large upload to a session whose node refused it: %d %s, %d adopts and %d uploads on b; want 503 and none", st, body, adopts(), b.uploads.Load())
	}
	// Known down before anything is sent: the session is adopted and the body streamed to its new
	// node, once.
	if st, body := upload(); st != 200 || adopts() != 1 || b.uploads.Load() != 1 || !strings.Contains(body, fmt.Sprintf(`"bytes":%d`, gateway.ReplayLimit+1)) {
		t.Errorf("a large upload to a session whose node is known gone: %d %s, %d adopts and %d uploads on b; want 200 from b, once", st, body, adopts(), b.uploads.Load())
	}
}
