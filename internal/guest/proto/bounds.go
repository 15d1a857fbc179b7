package proto

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// ArtifactMIMEs are the types an artifact may have. The daemon serves an artifact with its type,
// so it accepts only what the guest makes (figures as PNG), never markup a browser would run.
var ArtifactMIMEs = map[string]bool{"image/png": true}

// MaxChartBytes bounds a figure's chart (the guest caps what a chart holds well below it).
const MaxChartBytes = 512 << 10

// AddArtifact appends a to r.Artifacts if it is well formed (a plain file name, a type of
// ArtifactMIMEs) and fits MaxArtifacts and MaxArtifactsBytes, its chart counted with its content;
// it reports whether it did. A chart that is not JSON or is over MaxChartBytes is left out (the
// figure is kept). The guest adds artifacts as the code makes them; the daemon adds the guest's
// again to check them.
func (r *RunResult) AddArtifact(a Artifact) bool {
	if !validArtifactName(a.Name) || !ArtifactMIMEs[a.MIME] || len(r.Artifacts) >= MaxArtifacts {
		return false
	}
	if len(a.Chart) > MaxChartBytes || (len(a.Chart) > 0 && !json.Valid(a.Chart)) {
		a.Chart = nil
	}
	total := int64(len(a.Content) + len(a.Chart))
	for _, k := range r.Artifacts {
		total += int64(len(k.Content) + len(k.Chart))
	}
	if total > MaxArtifactsBytes {
		return false
	}
	r.Artifacts = append(r.Artifacts, a)
	return true
}

// validArtifactName accepts a file name of up to 255 bytes: UTF-8, no path separators, no control
// characters, not "." or "..".
func validArtifactName(name string) bool {
	if name == "" || len(name) > 255 || name == "." || name == ".." || !utf8.ValidString(name) {
		return false
	}
	return !strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '/' || r == '\\' })
}

// BoundOutputs keeps at most MaxOutputs outputs, cuts a text longer than MaxOutputText (at a
// character boundary), and leaves out HTML over MaxOutputHTML and JSON over MaxOutputJSON or not
// valid JSON. It returns nil for no outputs.
func BoundOutputs(outs []sandbox.Output) []sandbox.Output {
	if len(outs) > MaxOutputs {
		outs = outs[:MaxOutputs]
	}
	var kept []sandbox.Output
	for _, o := range outs {
		o.Text = cutUTF8(o.Text, MaxOutputText)
		if len(o.HTML) > MaxOutputHTML {
			o.HTML = ""
		}
		if len(o.JSON) > MaxOutputJSON || (len(o.JSON) > 0 && !json.Valid(o.JSON)) {
			o.JSON = nil
		}
		kept = append(kept, o)
	}
	return kept
}

// cutUTF8 returns s as valid UTF-8 of at most max bytes, cut at a character boundary.
func cutUTF8(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
