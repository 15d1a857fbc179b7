package proto

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

func TestAddArtifact(t *testing.T) {
	png := func(n int) []byte { return make([]byte, n) }
	tests := []struct {
		name string
		a    Artifact
		ok   bool
	}{
		{"a figure", Artifact{Name: "figure-1.png", MIME: "image/png", Content: png(10)}, true},
		{"no name", Artifact{MIME: "image/png"}, false},
		{"a path", Artifact{Name: "../x.png", MIME: "image/png"}, false},
		{"a backslash", Artifact{Name: `a\b.png`, MIME: "image/png"}, false},
		{"dot dot", Artifact{Name: "..", MIME: "image/png"}, false},
		{"a control character", Artifact{Name: "a\nb.png", MIME: "image/png"}, false},
		{"not UTF-8", Artifact{Name: "\xff.png", MIME: "image/png"}, false},
		{"a long name", Artifact{Name: strings.Repeat("a", 256), MIME: "image/png"}, false},
		{"HTML", Artifact{Name: "x.html", MIME: "text/html"}, false},
		{"too big", Artifact{Name: "big.png", MIME: "image/png", Content: png(MaxArtifactsBytes + 1)}, false},
		{"a figure with its chart", Artifact{Name: "figure-1.png", MIME: "image/png", Chart: json.RawMessage(`{"type":"line","elements":[]}`)}, true},
		{"a chart and a figure too big together", Artifact{Name: "big.png", MIME: "image/png", Content: png(MaxArtifactsBytes - 10), Chart: json.RawMessage(`{"type":"line","elements":[]}`)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r RunResult
			if got := r.AddArtifact(tt.a); got != tt.ok || len(r.Artifacts) != map[bool]int{true: 1}[tt.ok] {
				t.Errorf("got %v with %d artifacts, want %v", got, len(r.Artifacts), tt.ok)
			}
		})
	}
	t.Run("caps", func(t *testing.T) {
		var r RunResult
		half := Artifact{Name: "half.png", MIME: "image/png", Content: png(MaxArtifactsBytes / 2)}
		if !r.AddArtifact(half) || !r.AddArtifact(half) || r.AddArtifact(Artifact{Name: "one.png", MIME: "image/png", Content: png(1)}) {
			t.Errorf("the bytes cap: %d artifacts", len(r.Artifacts))
		}
		r = RunResult{}
		for i := 0; i < MaxArtifacts; i++ {
			if !r.AddArtifact(Artifact{Name: "f.png", MIME: "image/png"}) {
				t.Fatalf("artifact %d refused", i)
			}
		}
		if r.AddArtifact(Artifact{Name: "f.png", MIME: "image/png"}) {
			t.Errorf("more than %d artifacts", MaxArtifacts)
		}
	})
	t.Run("a bad chart is left out", func(t *testing.T) {
		for _, chart := range []string{`{"type":`, `"` + strings.Repeat("a", MaxChartBytes) + `"`} {
			var r RunResult
			if !r.AddArtifact(Artifact{Name: "f.png", MIME: "image/png", Chart: json.RawMessage(chart)}) || r.Artifacts[0].Chart != nil {
				t.Errorf("chart of %d bytes: %+v", len(chart), r.Artifacts)
			}
		}
	})
}

func TestBoundOutputs(t *testing.T) {
	if got := BoundOutputs(nil); got != nil {
		t.Errorf("no outputs: %+v", got)
	}
	long := strings.Repeat("é", MaxOutputText) // 2 bytes each
	outs := BoundOutputs([]sandbox.Output{
		{Text: "ok", HTML: "<b>ok</b>", JSON: json.RawMessage(`{"a":1}`)},
		{Text: long, HTML: strings.Repeat("x", MaxOutputHTML+1), JSON: json.RawMessage(`{"a":`)},
		{Text: "big json", JSON: json.RawMessage(`"` + strings.Repeat("x", MaxOutputJSON) + `"`)},
	})
	if len(outs) != 3 || outs[0].HTML != "<b>ok</b>" || string(outs[0].JSON) != `{"a":1}` {
		t.Fatalf("a good output changed: %+v", outs[0])
	}
	if o := outs[1]; len(o.Text) > MaxOutputText || len(o.Text) < MaxOutputText-1 || !utf8.ValidString(o.Text) || o.HTML != "" || o.JSON != nil {
		t.Errorf("over the caps: text %d bytes (valid %v), html %d bytes, json %q", len(o.Text), utf8.ValidString(o.Text), len(o.HTML), o.JSON)
	}
	if outs[2].JSON != nil {
		t.Errorf("JSON over its cap kept")
	}
	many := make([]sandbox.Output, MaxOutputs+5)
	if got := BoundOutputs(many); len(got) != MaxOutputs {
		t.Errorf("%d outputs kept, want %d", len(got), MaxOutputs)
	}
}
