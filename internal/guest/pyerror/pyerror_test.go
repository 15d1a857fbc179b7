package pyerror

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// The formatter takes the marker's place; the driver's own lines keep their numbers.
func TestInline(t *testing.T) {
	driver := "a = 1\n" + Marker + "\nmain()\n"
	got, err := Inline(driver)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "a = 1\n"+Source) || !strings.HasSuffix(got, "\nmain()\n") || strings.Contains(got, Marker) {
		t.Errorf("inlined:\n%s", got)
	}
	for _, bad := range []string{"a = 1\n", Marker + "\n" + Marker + "\n", "x = 1  " + Marker + "\n"} {
		if _, err := Inline(bad); err == nil {
			t.Errorf("Inline(%q) did not fail", bad)
		}
	}
}

// harness runs code as a driver does (compiled as "<string>", called from the driver's frame) and
// prints the record describe makes of the exception that ends it.
const harness = `import json, sys
` + Marker + `

def run(code, edit=None):
    describe = _agentbox_pyerror(edit)
    try:
        exec(compile(code, "<string>", "exec", dont_inherit=True), {})
    except BaseException as e:
        return describe(e)

cases = json.loads(sys.argv[1])
out = [run(c["code"], (lambda name, text: text.replace("line", "LINE")) if c.get("edit") else None) for c in cases]
sys.stdout.write(json.dumps(out))
`

type record struct {
	Name, Value, Traceback string
}

func TestDescribe(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		testenv.Skip(t, "needs python3")
	}
	type tc struct {
		Code string `json:"code"`
		Edit bool   `json:"edit,omitempty"`
	}
	cases := []tc{
		{Code: "def f():\n    raise ValueError('bad value')\nf()\n"},
		{Code: "x = ("},
		{Code: "class E(Exception):\n    def __str__(self):\n        raise RuntimeError\nraise E()\n"},
		{Code: "raise KeyError('k')\n", Edit: true},
	}
	arg, _ := json.Marshal(cases)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(python, "-I", "-c", MustInline(harness), string(arg))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	var got []record
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || len(got) != len(cases) {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	want := []struct {
		name, value, traceback string
	}{
		{"ValueError", "bad value", "Traceback (most recent call last):\n" +
			"  File \"<string>\", line 3, in <module>\n" +
			"  File \"<string>\", line 2, in f\n" +
			"ValueError: bad value\n"},
		{"SyntaxError", "", ""}, // checked below: its text differs between Python versions
		{"E", "<exception str() failed>", "Traceback (most recent call last):\n" +
			"  File \"<string>\", line 4, in <module>\n" +
			"E: <exception str() failed>\n"},
		{"KeyError", "'k'", "Traceback (most recent call last):\n" +
			"  File \"<string>\", LINE 1, in <module>\n" +
			"KeyError: 'k'\n"},
	}
	var echoed strings.Builder
	for i, w := range want {
		g := got[i]
		echoed.WriteString(g.Traceback)
		if g.Name != w.name || (w.value != "" && g.Value != w.value) {
			t.Errorf("case %d: name %q value %q, want %q %q", i, g.Name, g.Value, w.name, w.value)
		}
		if w.traceback != "" && g.Traceback != w.traceback {
			t.Errorf("case %d: traceback:\n%s\nwant:\n%s", i, g.Traceback, w.traceback)
		}
	}
	// A syntax error is raised by compile in the driver's frame: no frame is left, and Python
	// prints no "Traceback" header.
	if tb := got[1].Traceback; !strings.HasPrefix(tb, "  File \"<string>\", line 1\n") || strings.Contains(tb, "Traceback") || !strings.HasSuffix(tb, "\n") || !strings.Contains(tb, "SyntaxError: ") {
		t.Errorf("syntax error traceback:\n%s", tb)
	}
	// Every traceback was echoed to stderr, as Python echoes an uncaught exception's.
	if stderr.String() != echoed.String() {
		t.Errorf("stderr:\n%s\nwant the tracebacks:\n%s", stderr.String(), echoed.String())
	}
}
