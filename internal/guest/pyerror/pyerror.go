package pyerror

import (
	_ "embed"
	"fmt"
	"strings"
)

// Source is the formatter: pyerror.py, which defines _agentbox_pyerror.
//
//go:embed pyerror.py
var Source string

// Marker is the line of a driver's source that Inline replaces with Source. It is a comment, so
// the driver's file stays valid Python.
const Marker = "# @PYERROR@"

// Inline returns driver with Source in place of its Marker line, which must appear exactly once,
// as a line of its own. The driver calls _agentbox_pyerror (see pyerror.py) to get its describe.
func Inline(driver string) (string, error) {
	lines := strings.SplitAfter(driver, "\n")
	at := -1
	for i, l := range lines {
		if strings.TrimRight(l, "\r\n") != Marker {
			continue
		}
		if at >= 0 {
			return "", fmt.Errorf("pyerror: the driver has the marker %q more than once", Marker)
		}
		at = i
	}
	if at < 0 {
		return "", fmt.Errorf("pyerror: the driver has no line %q", Marker)
	}
	src := Source
	if !strings.HasSuffix(src, "\n") {
		src += "\n"
	}
	lines[at] = src
	return strings.Join(lines, ""), nil
}

// MustInline is Inline for a driver embedded in the binary, whose marker a test checks: it panics
// if the marker is missing or repeated.
func MustInline(driver string) string {
	s, err := Inline(driver)
	if err != nil {
		panic(err)
	}
	return s
}
