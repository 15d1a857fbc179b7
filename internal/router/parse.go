package router

import (
	"runtime"
	"strings"
	"time"
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
	// Uses are what the code does that nano cannot (threads, processes, sockets), where the
	// module that offers it is one nano can import (uses.go).
	Uses []Use
	// Dynamic counts __import__ and importlib.import_module calls whose module name is not a
	// literal: the router cannot see what they import.
	Dynamic int
	// Err is a syntax error the analysis is sure of; nil if none.
	Err *SyntaxError
	// Doubt is set when the grammar found an error the analysis is not sure of (tree-sitter's
	// grammar and CPython 3.11's differ in corners): the interpreter decides.
	Doubt *SyntaxError
	// Unread is set when the grammar could not read the code within its time budget
	// (parseBudget): Imports are then unknown, not empty.
	Unread bool
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

// Analyze reads src and collects its imports: import and from-import statements anywhere
// (functions and classes included), and __import__ and importlib.import_module calls with a
// literal name. Code in strings and comments is not code. Conditions are judged against
// targets; with none, every branch counts.
//
// The reading that decides is tree-sitter's Python grammar. The scan's tokens are read first
// (analyzeFast), and tree-sitter parses only what that reading is unsure of: the result is the
// same, in a fraction of the time.
func Analyze(src []byte, targets ...Target) *Analysis {
	if a, _ := analyzeFast(src, targets); a != nil {
		return a
	}
	return analyze(src, parseBudget(len(src)), targets...)
}

// analyze is Analyze by tree-sitter alone, with the parse's time budget given.
func analyze(src []byte, budget time.Duration, targets ...Target) *Analysis {
	p := getParser()
	tree := parse(p, src, budget)
	if tree != nil {
		putParser(p)
	} else {
		// A parse stopped by its budget leaves the parser mid-parse, and Reset does not clear all
		// of it: stopped while balancing the tree, tree-sitter 0.25 keeps canceled_balancing, and
		// the next parse on this parser "resumes" into a freed tree and aborts the process
		// (parser.c: Assertion `self->finished_tree.ptr' failed, seen under load). Never reuse it.
		p.Close()
	}
	a := &Analysis{}
	if tree == nil {
		a.Unread = true
		a.Err, a.Doubt = scanOnly(scan(src))
		return a
	}
	defer tree.Close()
	root := tree.RootNode()
	w := walker{src: src, a: a, targets: targets}
	w.imports(root)
	w.uses(root)
	if root.HasError() {
		a.Err, a.Doubt = syntaxError(src, root)
	} else {
		// The grammar is blind to indentation mistakes and to CPython's nesting limit.
		a.Err, a.Doubt = scanOnly(scan(src))
	}
	return a
}

// scanOnly judges the scan of code the grammar has no error in (or could not read): indentation
// errors and the nesting limit are things the grammar does not check, so they stand; another
// tokenizer error means the scan and the grammar disagree, and the interpreter decides.
func scanOnly(sr scanResult) (sure, doubt *SyntaxError) {
	lex := sr.lexErr
	switch {
	case sr.blockErr != nil && (lex == nil || before(sr.blockErr, lex)):
		return sr.blockErr, nil
	case lex == nil:
		return nil, nil
	case lex.Name != "SyntaxError" || lex.Msg == "too many nested parentheses":
		return lex, nil
	}
	return nil, lex
}

func before(a, b *SyntaxError) bool {
	return a.Line < b.Line || a.Line == b.Line && a.Column < b.Column
}

// readChunk is how much source tree-sitter gets per read. go-tree-sitter copies each chunk into
// C memory and keeps it until the parse ends, and tree-sitter reads again after each jump of its
// lexer (many, in error recovery): handing it the whole rest of the source each time made a
// 900 KB file of errors take minutes.
const readChunk = 4 << 10

// parseBudget bounds one parse: 100 ms plus 1 µs per byte (1.1 s for the largest code a request
// may carry). Valid code parses at about 4 MB/s here, four times inside it; tree-sitter's error
// recovery can take minutes on a few hundred KB of broken code, and this runs in the daemon.
func parseBudget(n int) time.Duration {
	return 100*time.Millisecond + time.Duration(n)*time.Microsecond
}

// parse returns the tree of src, or nil if parsing took longer than budget.
func parse(p *sitter.Parser, src []byte, budget time.Duration) *sitter.Tree {
	deadline := time.Now().Add(budget)
	return p.ParseWithOptions(func(i int, _ sitter.Point) []byte {
		if i >= len(src) {
			return nil
		}
		return src[i:min(i+readChunk, len(src))]
	}, nil, &sitter.ParseOptions{ProgressCallback: func(sitter.ParseState) bool {
		return time.Now().After(deadline)
	}})
}

// syntaxError decides what to report for a tree the grammar found errors in: the scan's
// tokenizer error if there is one (CPython reports those first), else the earliest of the
// grammar's first error and the scan's indentation error, with CPython's "was never closed" for a
// bracket left open.
func syntaxError(src []byte, root *sitter.Node) (sure, doubt *SyntaxError) {
	sr := scan(src)
	if sr.lexErr != nil {
		// The parser stops at an indentation error before the tokenizer reaches a later one.
		if e := sr.blockErr; e != nil && before(e, sr.lexErr) {
			return e, nil
		}
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
