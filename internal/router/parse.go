package router

import (
	"bytes"
	"runtime"
	"strings"
	"unicode/utf8"

	sitter "github.com/tree-sitter/go-tree-sitter"
	python "github.com/tree-sitter/tree-sitter-python/bindings/go"
)

// Import is one module the code imports.
type Import struct {
	// Module is the dotted name as written; relative imports keep their leading dots
	// (".models", "..").
	Module string
	// Names are what a from-import takes from Module (each may be a submodule); nil otherwise.
	Names []string
	// Line is 1-based.
	Line int
	// Optional marks an import the code can do without: inside a try whose handlers catch
	// ImportError (or inside such a handler), or under contextlib.suppress(ImportError).
	Optional bool
}

// Top is the top-level package of the import ("" for relative imports).
func (i Import) Top() string {
	if i.Module == "" || i.Module[0] == '.' {
		return ""
	}
	top, _, _ := cut(i.Module, '.')
	return top
}

// Analysis is what the router reads off the code.
type Analysis struct {
	// Imports in source order, apart from those under a condition false everywhere.
	Imports []Import
	// Skipped imports sit under a condition false in every target (if TYPE_CHECKING, a
	// version or platform test that fails), so they never run.
	Skipped []Import
	// Dynamic counts __import__ and importlib.import_module calls whose module name is not a
	// literal: the router cannot see what they import.
	Dynamic int
	// Err is a syntax error the analysis is sure of; nil if none.
	Err *SyntaxError
	// Doubt is set when the grammar found an error the analysis is not sure of (tree-sitter's
	// grammar and CPython 3.11's differ in corners): the interpreter decides.
	Doubt *SyntaxError
}

// Target is an interpreter the code may run on, for conditions such as
// `if sys.version_info >= (3, 12):` or `if sys.platform == "win32":`.
type Target struct {
	Version  [3]int // major, minor, micro
	Platform string // sys.platform: "wasi" for nano, "linux" for heavy
}

var language = sitter.NewLanguage(python.Language())

// parsers keeps tree-sitter parsers for reuse: a parser is not safe for concurrent use and
// costs an allocation of its own. A channel rather than a sync.Pool, because a parser holds C
// memory that only Close frees.
var parsers = make(chan *sitter.Parser, 2*runtime.GOMAXPROCS(0))

func getParser() *sitter.Parser {
	select {
	case p := <-parsers:
		return p
	default:
	}
	p := sitter.NewParser()
	if err := p.SetLanguage(language); err != nil {
		panic("router: tree-sitter python grammar: " + err.Error()) // the grammar is compiled in
	}
	return p
}

func putParser(p *sitter.Parser) {
	p.Reset()
	select {
	case parsers <- p:
	default:
		p.Close()
	}
}

// Analyze reads src with the tree-sitter Python grammar and collects its imports: import and
// from-import statements anywhere (functions and classes included), and __import__ and
// importlib.import_module calls with a literal name. Code in strings and comments is not code.
// Conditions are judged against targets; with none, every branch counts.
func Analyze(src []byte, targets ...Target) *Analysis {
	p := getParser()
	tree := p.Parse(src, nil)
	putParser(p)
	defer tree.Close()
	root := tree.RootNode()
	a := &Analysis{}
	w := walker{src: src, a: a, targets: targets}
	w.imports(root)
	if root.HasError() {
		a.Err, a.Doubt = syntaxError(src, root)
	} else if hasIndentation(src) {
		// The grammar is blind to indentation mistakes; CPython's rules are checked here.
		if sr := scan(src); sr.lexErr != nil && sr.lexErr.Name != "SyntaxError" {
			a.Err = sr.lexErr
		} else if sr.blockErr != nil {
			a.Err = sr.blockErr
		} else if sr.lexErr != nil {
			// A tokenizer error the grammar does not see: our scan and the grammar disagree.
			a.Doubt = sr.lexErr
		}
	}
	return a
}

// hasIndentation reports whether any line may open or close a block: a ':' anywhere, or a line
// starting with whitespace. Code without either cannot have an indentation error.
func hasIndentation(src []byte) bool {
	if bytes.IndexByte(src, ':') >= 0 || len(src) > 0 && (src[0] == ' ' || src[0] == '\t') {
		return true
	}
	return bytes.Contains(src, []byte("\n ")) || bytes.Contains(src, []byte("\n\t"))
}

// syntaxError decides what to report for a tree the grammar found errors in: the scan's
// tokenizer error if there is one (CPython reports those first), else the earliest of the
// grammar's first error and the scan's indentation error, with CPython's "was never closed" for a
// bracket left open.
func syntaxError(src []byte, root *sitter.Node) (sure, doubt *SyntaxError) {
	sr := scan(src)
	if sr.lexErr != nil {
		return sr.lexErr, nil
	}
	n := firstError(root)
	var ts *SyntaxError
	if n != nil {
		ts = nodeError(src, n)
		if inString(n) || suspectIndent(sr, ts.Line-1) {
			doubt, ts = ts, nil
		}
	}
	if b := sr.unclosed; b != nil {
		if ts != nil && ts.Line == b.line+1 && ts.Column > charCol(src, b.line, b.col)+1 {
			return ts, nil // an error after the bracket on its own line: CPython says "invalid syntax"
		}
		text := lineOf(src, b.line)
		return &SyntaxError{Name: "SyntaxError", Msg: "'" + string(b.ch) + "' was never closed", Line: b.line + 1,
			Column: charCol(src, b.line, b.col) + 1, Text: string(text)}, nil
	}
	if e := sr.blockErr; e != nil && (ts == nil || e.Line <= ts.Line) {
		return e, nil
	}
	if ts != nil {
		return ts, nil
	}
	return nil, doubt
}

// firstError returns the first ERROR or MISSING node in source order. tree-sitter's recovery can
// wrap a long stretch of good code into one ERROR node (from the top of the file to the bad
// token); inside one, the error is its first error below, or else its first child that is not a
// whole statement.
func firstError(n *sitter.Node) *sitter.Node {
	for i := uint(0); i < n.ChildCount(); i++ {
		c := n.Child(i)
		switch {
		case c.IsMissing():
			return c
		case c.IsError():
			return innerError(c)
		case c.HasError():
			if e := firstError(c); e != nil {
				return e
			}
		}
	}
	return nil
}

func innerError(e *sitter.Node) *sitter.Node {
	if inner := firstError(e); inner != nil {
		return inner
	}
	for i := uint(0); i < e.ChildCount(); i++ {
		c := e.Child(i)
		if k := c.Kind(); !c.IsNamed() || !(strings.HasSuffix(k, "_statement") || strings.HasSuffix(k, "definition") || k == "comment") {
			return c
		}
	}
	return e
}

func nodeError(src []byte, n *sitter.Node) *SyntaxError {
	pos := n.StartPosition()
	line := int(pos.Row)
	msg := "invalid syntax"
	if n.IsMissing() && n.Kind() == ":" {
		msg = "expected ':'"
	}
	return &SyntaxError{Name: "SyntaxError", Msg: msg, Line: line + 1, Column: charCol(src, line, int(pos.Column)) + 1,
		Text: string(lineOf(src, line))}
}

// inString reports whether n lies in a string: the grammar reads f-strings by 3.12's rules and
// misreads some format specs (f"{x:=}"), so errors there are left to the interpreter.
func inString(n *sitter.Node) bool {
	for p := n; p != nil; p = p.Parent() {
		switch p.Kind() {
		case "string", "interpolation", "format_specifier", "string_content":
			return true
		}
	}
	return false
}

// suspectIndent reports whether line (0-based) belongs to a logical line, or follows one, that
// has a continuation line indented less than its first: tree-sitter-python reads a dedent there.
func suspectIndent(sr scanResult, line int) bool {
	for _, l := range []int{line, line - 1} {
		if l >= 0 && l < len(sr.logical) && sr.oddIndent[sr.logical[l]] {
			return true
		}
	}
	return false
}

// charCol turns a byte column of a 0-based line into a character column.
func charCol(src []byte, line, byteCol int) int {
	t := lineOf(src, line)
	if byteCol > len(t) {
		byteCol = len(t)
	}
	return utf8.RuneCount(t[:byteCol])
}

func cut(s string, sep byte) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
