package router

import (
	"fmt"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// SyntaxError is an error in the code found without running it, in CPython's terms.
type SyntaxError struct {
	// Name is SyntaxError, IndentationError or TabError, as CPython would raise.
	Name string
	// Msg is CPython's message where the error is one of its tokenizer's or indentation rules
	// ("'(' was never closed"); "invalid syntax" for what only the grammar finds.
	Msg string
	// Line and Column are 1-based; Column counts characters, as CPython's offset does.
	Line, Column int
	// Text is the source line.
	Text string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s (line %d, column %d)", e.Msg, e.Line, e.Column)
}

// PyError renders the error as the exception of a run, with the traceback CPython prints for it
// (the code's file name is "<string>", as in a run).
func (e *SyntaxError) PyError() *sandbox.PyError {
	var tb strings.Builder
	fmt.Fprintf(&tb, "  File \"<string>\", line %d\n", e.Line)
	rtext := strings.TrimRight(e.Text, "\n")
	ltext := strings.TrimLeft(rtext, " \n\f")
	spaces := len([]rune(rtext)) - len([]rune(ltext))
	fmt.Fprintf(&tb, "    %s\n", ltext)
	if col := e.Column - 1 - spaces; col >= 0 {
		var pad strings.Builder
		for i, r := range []rune(ltext) {
			if i >= col {
				break
			}
			if r == '\t' || r == '\f' || r == '\v' {
				pad.WriteRune(r)
			} else {
				pad.WriteByte(' ')
			}
		}
		fmt.Fprintf(&tb, "    %s^\n", pad.String())
	}
	fmt.Fprintf(&tb, "%s: %s\n", e.Name, e.Msg)
	return &sandbox.PyError{Name: e.Name, Value: e.Error(), Traceback: tb.String()}
}
