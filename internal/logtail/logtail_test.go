package logtail

import (
	"strings"
	"testing"
)

func TestTailKeepsLastLines(t *testing.T) {
	var tl Tail
	if tl.String() != "no log" {
		t.Errorf("empty tail: %q", tl.String())
	}
	var seen int
	tl.Follow(strings.NewReader("1\n2\n3\n4\n5\n6\n7"), func(string) { seen++ })
	if seen != 7 || tl.String() != "3; 4; 5; 6; 7" {
		t.Errorf("saw %d lines, kept %q", seen, tl.String())
	}
}
