package router

import (
	"os"
	"testing"
	"time"
)

// A parse stopped by its budget at any point (while parsing, while balancing the tree) must not
// break the next parse: tree-sitter 0.25 leaves a parser stopped while balancing half-resumed
// even after Reset, and the next parse on it aborted the whole process (parser.c: Assertion
// `self->finished_tree.ptr' failed, seen in the router's tests under load; reproduced with
// budgets near a whole parse's time, about one in 300). Stopped parsers are closed, never pooled:
// this stops parses around the end of the work, where balancing happens, each followed by the
// next from the pool.
func TestParseStoppedAnywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of parsing")
	}
	src, err := os.ReadFile("testdata/bench/agent_1000.py")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if a := analyze(src, time.Minute); a.Unread {
		t.Fatal("a whole parse was stopped")
	}
	whole := time.Since(start)
	stopped := 0
	for i := range 400 {
		if analyze(src, whole*time.Duration(70+i%40)/100).Unread {
			stopped++
		}
	}
	if a := analyze(src, time.Minute); a.Unread || len(a.Imports) == 0 {
		t.Fatalf("after %d stopped parses: unread %v, %d imports", stopped, a.Unread, len(a.Imports))
	}
	t.Logf("a whole parse took %v; %d of 400 parses stopped by their budget", whole, stopped)
}
