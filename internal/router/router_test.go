package router

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// snippet is one file of testdata/snippets: real-world shaped code whose first comment lines say
// what the router must decide: "# tier: heavy", one "# reason: ..." per reason in order, and for
// code that cannot run "# error: Name: message".
type snippet struct {
	name, code string
	tier       sandbox.Tier
	reasons    []string
	err        string
}

func loadSnippets(t testing.TB) []snippet {
	t.Helper()
	files, err := filepath.Glob("testdata/snippets/*.py")
	if err != nil || len(files) == 0 {
		t.Fatalf("no snippets: %v", err)
	}
	var out []snippet
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := snippet{name: strings.TrimSuffix(filepath.Base(f), ".py"), code: string(b)}
		sc := bufio.NewScanner(strings.NewReader(s.code))
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "# tier: "); ok {
				s.tier = sandbox.Tier(v)
			} else if v, ok := strings.CutPrefix(line, "# reason: "); ok {
				s.reasons = append(s.reasons, v)
			} else if v, ok := strings.CutPrefix(line, "# error: "); ok {
				s.err = v
			} else {
				break
			}
		}
		if s.tier == "" || len(s.reasons) == 0 {
			t.Fatalf("%s: no expectation in its header", f)
		}
		out = append(out, s)
	}
	return out
}

func TestRouteSnippets(t *testing.T) {
	r := New(fixtureOptions(t))
	snippets := loadSnippets(t)
	if len(snippets) < 40 {
		t.Errorf("%d snippets, want at least 40", len(snippets))
	}
	for _, s := range snippets {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			d, err := r.Route(&sandbox.RunRequest{Code: s.code, Tier: sandbox.TierAuto})
			if err != nil {
				t.Fatal(err)
			}
			if d.Tier != s.tier || !slices.Equal(d.Reasons, s.reasons) {
				t.Errorf("got %s %q\nwant %s %q", d.Tier, d.Reasons, s.tier, s.reasons)
			}
			var got string
			if d.SyntaxError != nil {
				got = d.SyntaxError.Name + ": " + strings.SplitN(d.SyntaxError.Value, " (line ", 2)[0]
			}
			if got != s.err {
				t.Errorf("error %q, want %q", got, s.err)
			}
		})
	}
}
