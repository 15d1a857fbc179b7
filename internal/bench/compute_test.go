package bench

import (
	"os/exec"
	"testing"
)

func TestParseTiming(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, out string
		secs          float64
		bad           bool
	}{
		{"output then marker", "1 2 3\n\n" + timingMarker + "0.250000000\n", "1 2 3", 0.25, false},
		{"open line", "abc\n" + timingMarker + "1.5\n", "abc", 1.5, false},
		{"no output", "\n" + timingMarker + "2\n", "", 2, false},
		{"no marker", "hi\n", "", 0, true},
		{"garbage", timingMarker + "soon\n", "", 0, true},
		{"negative", timingMarker + "-1\n", "", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, secs, err := parseTiming(tt.in)
			if tt.bad {
				if err == nil {
					t.Errorf("parseTiming(%q) = %q, %v; want an error", tt.in, out, secs)
				}
				return
			}
			if err != nil || out != tt.out || secs != tt.secs {
				t.Errorf("parseTiming(%q) = %q, %v, %v; want %q, %v", tt.in, out, secs, err, tt.out, tt.secs)
			}
		})
	}
}

// TestWrapSnippetRuns runs the wrapper with the native interpreter: quotes, backslashes and
// non-ASCII in the code survive, the snippet's namespace is its own, and the timing parses.
func TestWrapSnippetRuns(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath(DefaultPython())
	if err != nil {
		t.Skip("no python3")
	}
	code := "s = 'it\\'s \"quoted\" \\\\ é'\nprint(s, __name__, '_bench_t0' in globals())\n"
	out, err := exec.Command(py, "-c", wrapSnippet(snippet{Name: "q", Code: code})).Output()
	if err != nil {
		t.Fatal(err)
	}
	got, secs, err := parseTiming(string(out))
	if err != nil {
		t.Fatal(err)
	}
	if want := `it's "quoted" \ é __main__ False`; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	if secs <= 0 || secs > 5 {
		t.Errorf("seconds = %v", secs)
	}
}
