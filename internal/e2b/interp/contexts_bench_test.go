package interp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// BenchmarkContexts measures what a code context costs in a heavy sandbox, beside what it cost
// when each context was a session of its own, in the same run:
//
//	cell:                a cell in the default context (the floor)
//	context:             createCodeContext + a first cell in it + removeCodeContext
//	session (baseline):  a new session + a first cell + closing it (a context before)
//
// Each reports its median and p99 (ms) besides ns/op.
//
//	sudo go test ./internal/e2b/interp/ -run '^$' -bench Contexts -benchtime 30x
func BenchmarkContexts(b *testing.B) {
	srv, acme, _ := interpServer(b, "heavy")
	ctx := context.Background()
	call := func(method, path string, body any) []byte {
		bs, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(bs))
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Body.Close()
		var out bytes.Buffer
		out.ReadFrom(r.Body)
		if r.StatusCode != 200 {
			b.Fatalf("%s %s: %d %s", method, path, r.StatusCode, out.Bytes())
		}
		return out.Bytes()
	}
	cell := func(body map[string]any) {
		if out := call(http.MethodPost, "/execute", body); !bytes.Contains(out, []byte("end_of_execution")) || bytes.Contains(out, []byte(`"type":"error"`)) {
			b.Fatalf("cell: %s", out)
		}
	}
	cell(map[string]any{"code": "import pandas"}) // the sandbox warm, as an SDK user's would be

	b.Run("cell", func(b *testing.B) {
		measure(b, func() { cell(map[string]any{"code": "x = 1"}) })
	})
	b.Run("context", func(b *testing.B) {
		measure(b, func() {
			var c struct{ ID string }
			json.Unmarshal(call(http.MethodPost, "/contexts", map[string]any{"language": "python"}), &c)
			cell(map[string]any{"code": "x = 1", "context_id": c.ID})
			call(http.MethodDelete, "/contexts/"+c.ID, nil)
		})
	})
	b.Run("session-baseline", func(b *testing.B) {
		measure(b, func() {
			n, err := acme.CreateSession(ctx, sandbox.SessionOptions{Tier: "heavy"})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := acme.RunInSession(ctx, n.ID, &sandbox.RunRequest{Code: "x = 1"}); err != nil {
				b.Fatal(err)
			}
			if err := acme.CloseSession(n.ID); err != nil {
				b.Fatal(err)
			}
		})
	})
}
