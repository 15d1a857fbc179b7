package interp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// BenchmarkBashCell measures a bash cell of the code interpreter (a run of the session's
// interpreter handing the cell to the context's persistent shell) beside, in the same run:
//
//	python:            a Python cell printing a line (the floor: one run of the session)
//	bash:              a bash cell echoing a line in the context's shell
//	command-baseline:  the same line as a one-off command (what a bash cell was: no state kept)
//
// Each reports its median and p99 (ms) besides ns/op.
//
//	sudo go test ./internal/e2b/interp/ -run '^$' -bench BashCell -benchtime 30x
func BenchmarkBashCell(b *testing.B) {
	srv, acme, sid := interpServer(b, "heavy")
	ctx := context.Background()
	cell := func(body map[string]any) {
		bs, _ := json.Marshal(body)
		r, err := http.Post(srv.URL+"/execute", "application/json", bytes.NewReader(bs))
		if err != nil {
			b.Fatal(err)
		}
		var out bytes.Buffer
		out.ReadFrom(r.Body)
		r.Body.Close()
		if !bytes.Contains(out.Bytes(), []byte(`"text":"1\n"`)) || bytes.Contains(out.Bytes(), []byte(`"type":"error"`)) {
			b.Fatalf("cell: %s", out.Bytes())
		}
	}
	cell(map[string]any{"code": "print(1)"})
	cell(map[string]any{"code": "echo 1", "language": "bash"}) // the shell started
	b.Run("python", func(b *testing.B) {
		measure(b, func() { cell(map[string]any{"code": "print(1)"}) })
	})
	b.Run("bash", func(b *testing.B) {
		measure(b, func() { cell(map[string]any{"code": "echo 1", "language": "bash"}) })
	})
	b.Run("command-baseline", func(b *testing.B) {
		measure(b, func() {
			c, err := acme.RunCommand(ctx, sid, sandbox.Command{Argv: []string{"/bin/bash", "-c", "echo 1"}}, nil)
			if err != nil || c.Stdout != "1\n" {
				b.Fatalf("%v %+v", err, c)
			}
		})
	})
}
