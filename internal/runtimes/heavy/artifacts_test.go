package heavy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// staleGuest is the hint for a result without what this package's guest returns.
const staleGuest = "(if the image's guest agent predates artifacts, `agentbox image build python-datascience` refreshes it)"

// checkPNG checks that a is a well-described PNG of sensible size, and returns its dimensions.
func checkPNG(t *testing.T, a sandbox.Artifact, name string) (int, int) {
	t.Helper()
	if a.Name != name || a.MIME != "image/png" || a.ID != "" {
		t.Errorf("artifact %q (%s, id %q), want %s, image/png and no id", a.Name, a.MIME, a.ID, name)
	}
	sum := sha256.Sum256(a.Content)
	if a.Size != int64(len(a.Content)) || a.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("%s: size %d sha256 %s for %d bytes", a.Name, a.Size, a.SHA256, len(a.Content))
	}
	if !bytes.HasPrefix(a.Content, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("%s is not a PNG: %q", a.Name, a.Content[:min(16, len(a.Content))])
	}
	img, err := png.Decode(bytes.NewReader(a.Content))
	if err != nil {
		t.Fatalf("%s: %v", a.Name, err)
	}
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	if w < 200 || w > 4000 || h < 150 || h > 4000 {
		t.Errorf("%s is %dx%d", a.Name, w, h)
	}
	return w, h
}

// Figures come back as PNG artifacts: each plt.show() returns the open figures and closes them,
// and figures left open at the end of a run come back too. A run that never imports matplotlib
// pays nothing for this.
func TestFigures(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: 1})
	run := func(t *testing.T, code string) *sandbox.Result {
		t.Helper()
		res, err := rt.Run(context.Background(), &sandbox.RunRequest{Limits: limits(t, 60*time.Second), Code: code})
		if err != nil {
			t.Fatal(err)
		}
		if res.Error != nil {
			t.Fatalf("%s: %s\n%s", res.Error.Name, res.Error.Value, res.Stderr)
		}
		return res
	}
	t.Run("show", func(t *testing.T) {
		res := run(t, `
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9])
plt.title("squares")
plt.show()
print("shown")
`)
		if len(res.Artifacts) != 1 {
			t.Fatalf("%d artifacts, want 1 %s; stderr %q", len(res.Artifacts), staleGuest, res.Stderr)
		}
		w, h := checkPNG(t, res.Artifacts[0], "figure-1.png")
		if w <= h {
			t.Errorf("a default figure of %dx%d, want landscape", w, h)
		}
		if res.Stdout != "shown\n" || res.Stderr != "" || len(res.Outputs) != 0 {
			t.Errorf("stdout %q stderr %q outputs %+v", res.Stdout, res.Stderr, res.Outputs)
		}
	})
	t.Run("shown and left open", func(t *testing.T) {
		// Each show() takes what is open; the figure drawn after it is a new one, and the one
		// left open comes back at the end. Rebinding the code's names changes nothing.
		res := run(t, `
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(4, 4))
ax.bar(["a", "b"], [3, 5])
plt.show()
plt.plot([3, 2, 1])
plt.show()
plt.figure(figsize=(8, 2))
plt.plot([0, 1])
plt = show = None
`)
		if len(res.Artifacts) != 3 {
			t.Fatalf("%d artifacts, want 3 %s; stderr %q", len(res.Artifacts), staleGuest, res.Stderr)
		}
		for i, a := range res.Artifacts {
			checkPNG(t, a, fmt.Sprintf("figure-%d.png", i+1))
		}
		if w, h := checkPNG(t, res.Artifacts[2], "figure-3.png"); w < 3*h {
			t.Errorf("the figure left open is %dx%d, want 8:2", w, h)
		}
		if bytes.Equal(res.Artifacts[0].Content, res.Artifacts[1].Content) {
			t.Error("show() did not close the figure it returned")
		}
	})
	t.Run("left open", func(t *testing.T) {
		res := run(t, "import matplotlib.pyplot as plt\nplt.plot([1, 2])\n")
		if len(res.Artifacts) != 1 {
			t.Fatalf("%d artifacts, want 1 %s; stderr %q", len(res.Artifacts), staleGuest, res.Stderr)
		}
		checkPNG(t, res.Artifacts[0], "figure-1.png")
	})
	t.Run("session", func(t *testing.T) {
		// A figure comes back with the cell that drew it, and only with it; a cell stopped at its
		// timeout closes its figures undrawn, and the session goes on.
		l := limits(t, 60*time.Second)
		s := newSession(t, rt, l)
		cell := func(code string) (*sandbox.Result, error) {
			rl := l
			if strings.Contains(code, "while True") {
				rl.Timeout = 2 * time.Second
			}
			return s.Run(context.Background(), &sandbox.RunRequest{Code: code, Limits: rl})
		}
		if res, err := cell("import matplotlib.pyplot as plt\nplt.plot([1, 2])\n"); err != nil || len(res.Artifacts) != 1 {
			t.Fatalf("first cell: %v %+v %s", err, res, staleGuest)
		}
		if res, err := cell("plt.show()\nx = 1\n"); err != nil || len(res.Artifacts) != 0 {
			t.Fatalf("a cell without figures: %v %+v", err, res)
		}
		_, err := cell("plt.plot([3, 1])\nwhile True:\n    pass\n")
		r := sandbox.AsError(err)
		if r == nil || r.Kind != sandbox.KindTimeout || r.Result == nil || len(r.Result.Artifacts) != 0 || !strings.Contains(r.Result.Stderr, "closed without being drawn") {
			t.Fatalf("a cell stopped at its timeout: %v", err)
		}
		res, err := cell("plt.plot([1, 3])\nplt.show()\nprint(x)\n")
		if err != nil || res.Stdout != "1\n" || len(res.Artifacts) != 1 {
			t.Fatalf("after the timeout: %v %+v", err, res)
		}
		checkPNG(t, res.Artifacts[0], "figure-1.png")
	})
	t.Run("no matplotlib", func(t *testing.T) {
		res := run(t, "import sys\nprint('matplotlib' in sys.modules, 'agentbox_inline' in sys.modules)\n")
		if res.Stdout != "False False\n" || len(res.Artifacts) != 0 || len(res.Outputs) != 0 {
			t.Errorf("stdout %q, %d artifacts, %d outputs", res.Stdout, len(res.Artifacts), len(res.Outputs))
		}
	})
}

// The value of a cell's last expression comes back as a rich output, not printed: a DataFrame
// with text, HTML and JSON. A cell that ends otherwise has none, and one whose last expression
// raises reports the error at its line. The session goes on after all of these.
func TestLastExpression(t *testing.T) {
	rt := newTestRuntime(t, Options{Warm: -1})
	l := limits(t, 60*time.Second)
	s := newSession(t, rt, l)
	run := func(t *testing.T, code string) *sandbox.Result {
		t.Helper()
		res, err := s.Run(context.Background(), &sandbox.RunRequest{Code: code, Limits: l})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run(t, `
import pandas as pd
df = pd.DataFrame({"city": ["Oslo", "Lima"], "temp": [4.5, 19.0]})
df
`)
	if res.Error != nil || res.Stdout != "" {
		t.Fatalf("error %+v stdout %q stderr %q", res.Error, res.Stdout, res.Stderr)
	}
	if len(res.Outputs) != 1 {
		t.Fatalf("%d outputs, want 1 %s", len(res.Outputs), staleGuest)
	}
	o := res.Outputs[0]
	if !strings.Contains(o.Text, "Oslo") || !strings.Contains(o.Text, "temp") {
		t.Errorf("text %q", o.Text)
	}
	if !strings.Contains(o.HTML, "<table") || !strings.Contains(o.HTML, "Lima") {
		t.Errorf("html %q", o.HTML)
	}
	var table struct {
		Schema struct {
			Fields []struct{ Name string } `json:"fields"`
		} `json:"schema"`
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(o.JSON, &table); err != nil || len(table.Data) != 2 || table.Data[1]["city"] != "Lima" || len(table.Schema.Fields) != 3 {
		t.Errorf("json %s: %v", o.JSON, err)
	}

	for _, code := range []string{"x = 1", "None", "print('printed')", "df;"} {
		if res := run(t, code); res.Error != nil || len(res.Outputs) != 0 {
			t.Errorf("%q: error %+v, outputs %+v", code, res.Error, res.Outputs)
		}
	}

	res = run(t, "y = 2\n\ndf['no such column'] + y\n")
	if res.Error == nil || res.Error.Name != "KeyError" || len(res.Outputs) != 0 {
		t.Fatalf("error %+v outputs %+v", res.Error, res.Outputs)
	}
	if !strings.Contains(res.Error.Traceback, ", line 3, in <module>") || !strings.Contains(res.Error.Traceback, "df['no such column'] + y") {
		t.Errorf("traceback does not point at line 3:\n%s", res.Error.Traceback)
	}

	res = run(t, "print(x + y)\ndf.temp.sum()\n")
	if res.Error != nil || res.Stdout != "3\n" || len(res.Outputs) != 1 || res.Outputs[0].Text != "23.5" || res.Outputs[0].JSON != nil {
		t.Errorf("after the others: error %+v stdout %q outputs %+v", res.Error, res.Stdout, res.Outputs)
	}
}
