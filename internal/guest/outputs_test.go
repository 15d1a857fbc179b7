//go:build linux

package guest

import (
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/guest/proto"
)

// cell runs code as request id of a session and returns its result and streams.
func cell(t *testing.T, in io.Writer, out io.Reader, id uint64, code string) (*proto.RunResult, string, string) {
	t.Helper()
	return cellWith(t, in, out, id, code, false)
}

// cellWith is cell, with forkAfter asking the REPL to fork behind the cell's report.
func cellWith(t *testing.T, in io.Writer, out io.Reader, id uint64, code string, forkAfter bool) (*proto.RunResult, string, string) {
	t.Helper()
	req := &proto.Frame{Op: proto.OpRun, ID: id, Run: &proto.RunRequest{
		Code: code, Session: true, StdoutBytes: 1 << 20, StderrBytes: 1 << 20, FilesBytes: 1 << 20, ForkAfter: forkAfter,
	}}
	if err := proto.Write(in, req); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	for {
		var f proto.Frame
		if err := proto.Read(out, &f, 0); err != nil {
			t.Fatal(err)
		}
		if f.ID != id {
			t.Fatalf("frame for %d during %d", f.ID, id)
		}
		switch f.Op {
		case proto.OpOutput:
			if f.Stream == proto.Stdout {
				stdout.Write(f.Data)
			} else {
				stderr.Write(f.Data)
			}
		case proto.OpResult:
			return f.Result, stdout.String(), stderr.String()
		default:
			t.Fatalf("%q: %+v", code, f)
		}
	}
}

// The value of a cell's last expression comes back as an output, in each representation it
// offers, and is not printed; a cell ending in anything else has none.
func TestServeOutputs(t *testing.T) {
	in, out, _ := serve(t)
	defer in.Close()
	mustCell(t, in, out, 1, `
class Rich:
    def __repr__(self):
        return "Rich()"
    def _repr_html_(self):
        return "<b>rich</b>"
    def _repr_json_(self):
        return {"a": [1, 2]}

class Bad:
    def _repr_html_(self):
        raise ValueError("no html")
    def _repr_json_(self):
        return float("nan")

class Everything:
    def __getattr__(self, name):
        return lambda: "<i>anything</i>"
    def __repr__(self):
        return "Everything()"
`)
	tests := []struct {
		name, code string
		want       string // the outputs as JSON; "null" for none
		stderr     string // a substring of stderr, if any
	}{
		{"expression", "x = 20\nx + 22", `[{"text":"42"}]`, ""},
		{"assignment last", "y = 1", "null", ""},
		{"None", "None", "null", ""},
		{"print returns None", "print('p')", "null", ""},
		{"semicolon hides", "x;", "null", ""},
		{"semicolon in a comment", "x  # a;", `[{"text":"20"}]`, ""},
		{"rich", "Rich()", `[{"text":"Rich()","html":"<b>rich</b>","json":{"a":[1,2]}}]`, ""},
		{"failing reprs", "Bad()", `[{"text":"<__main__.Bad object at ADDR>"}]`, "_repr_html_() of the value failed: ValueError: no html"},
		{"every attribute", "Everything()", `[{"text":"Everything()"}]`, ""},
		{"a class", "Rich", `[{"text":"<class '__main__.Rich'>"}]`, ""},
		{"long text", "'é' * 100000", "", ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, stdout, stderr := cell(t, in, out, uint64(10+i), tt.code)
			if r.Error != nil {
				t.Fatalf("error: %+v", r.Error)
			}
			if strings.Contains(stdout, "42") || strings.Contains(stdout, "Rich()") {
				t.Errorf("the value was printed: %q", stdout)
			}
			if tt.stderr != "" && !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr %q, want %q in it", stderr, tt.stderr)
			}
			if tt.name == "long text" {
				if len(r.Outputs) != 1 || len(r.Outputs[0].Text) > proto.MaxOutputText || !strings.HasSuffix(r.Outputs[0].Text, "[truncated]") {
					t.Errorf("long text not cut: %d outputs", len(r.Outputs))
				}
				return
			}
			var got strings.Builder
			enc := json.NewEncoder(&got)
			enc.SetEscapeHTML(false)
			enc.Encode(r.Outputs)
			if s := addr.ReplaceAllString(strings.TrimSpace(got.String()), " at ADDR"); s != tt.want {
				t.Errorf("outputs %s, want %s", s, tt.want)
			}
		})
	}
}

// addr matches an object's address in a repr.
var addr = regexp.MustCompile(` at 0x[0-9a-f]+`)

func mustCell(t *testing.T, in io.Writer, out io.Reader, id uint64, code string) *proto.RunResult {
	t.Helper()
	r, _, stderr := cell(t, in, out, id, code)
	if r.Error != nil {
		t.Fatalf("%q: %+v %s", code, r.Error, stderr)
	}
	return r
}

// A last expression that raises is the cell's error, with the cell's own line numbers; the
// session goes on.
func TestServeLastExpressionError(t *testing.T) {
	in, out, _ := serve(t)
	defer in.Close()
	r, _, stderr := cell(t, in, out, 1, "a = 1\nb = 0\n\na / b\n")
	if r.Error == nil || r.Error.Name != "ZeroDivisionError" || r.Outputs != nil {
		t.Fatalf("result: %+v", r)
	}
	if !strings.Contains(r.Error.Traceback, `File "<run-1>", line 4, in <module>`) || !strings.Contains(r.Error.Traceback, "a / b") {
		t.Errorf("traceback:\n%s", r.Error.Traceback)
	}
	if !strings.Contains(stderr, "ZeroDivisionError") {
		t.Errorf("stderr: %q", stderr)
	}
	r, _, _ = cell(t, in, out, 2, "class R:\n    def __repr__(self):\n        raise KeyError('k')\nR()\n")
	if r.Error == nil || r.Error.Name != "KeyError" || !strings.Contains(r.Error.Traceback, `File "<run-2>", line 3, in __repr__`) {
		t.Errorf("a failing repr: %+v", r.Error)
	}
	if r := mustCell(t, in, out, 3, "a + 1"); len(r.Outputs) != 1 || r.Outputs[0].Text != "2" {
		t.Errorf("after the errors: %+v", r.Outputs)
	}
}

// Artifact reports reach the result; the agent keeps only well-formed ones within the caps,
// whatever the code writes to the report pipe.
func TestServeArtifactReports(t *testing.T) {
	in, out, _ := serve(t)
	defer in.Close()
	r := mustCell(t, in, out, 1, `
import base64, json, os
def send(name, mime, data):
    b = json.dumps({"artifact": {"name": name, "mime": mime, "content": base64.b64encode(data).decode()}}).encode()
    os.write(4, len(b).to_bytes(4, "little") + b)
send("figure-1.png", "image/png", b"\x89PNG one")
send("../escape.png", "image/png", b"x")
send("page.html", "text/html", b"<script>")
send("figure-2.png", "image/png", b"\x89PNG two")
`)
	if len(r.Artifacts) != 2 || r.Artifacts[0].Name != "figure-1.png" || string(r.Artifacts[1].Content) != "\x89PNG two" {
		t.Errorf("artifacts: %+v", r.Artifacts)
	}
	if r := mustCell(t, in, out, 2, "1"); len(r.Artifacts) != 0 {
		t.Errorf("artifacts carried over to the next run: %+v", r.Artifacts)
	}
}
