package router

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// syntaxCases are code with errors, and what CPython 3.11 says of each (name, message, line,
// offset), as measured with compile(). "invalid syntax" cases come from the grammar; CPython may
// say more there ("expected ':'"), and only the line is promised.
var syntaxCases = []struct {
	name, code string
	want       SyntaxError // Text is not compared
}{
	{"invalid assignment", "x = = 1\n", SyntaxError{Name: "SyntaxError", Msg: "invalid syntax", Line: 1, Column: 5}},
	{"never closed at eof", "print(\"a\"\n", SyntaxError{Name: "SyntaxError", Msg: "'(' was never closed", Line: 1, Column: 6}},
	{"never closed before next line", "x = (1,\ny = 2\n", SyntaxError{Name: "SyntaxError", Msg: "'(' was never closed", Line: 1, Column: 5}},
	{"never closed list", "x = [\n 1,\n  2\n", SyntaxError{Name: "SyntaxError", Msg: "'[' was never closed", Line: 1, Column: 5}},
	{"two calls one unclosed", "print('x'\nprint('y')\n", SyntaxError{Name: "SyntaxError", Msg: "'(' was never closed", Line: 1, Column: 6}},
	{"error after bracket on its line", "def f(:\n    pass\n", SyntaxError{Name: "SyntaxError", Msg: "invalid syntax", Line: 1, Column: 7}},
	{"unterminated string", "print(\"abc)\n", SyntaxError{Name: "SyntaxError", Msg: "unterminated string literal (detected at line 1)", Line: 1, Column: 7}},
	{"unterminated string mid file", "x = 'abc\ny = 2\n", SyntaxError{Name: "SyntaxError", Msg: "unterminated string literal (detected at line 1)", Line: 1, Column: 5}},
	{"unterminated triple", "s = \"\"\"\nabc\n", SyntaxError{Name: "SyntaxError", Msg: "unterminated triple-quoted string literal (detected at line 2)", Line: 1, Column: 5}},
	{"unterminated triple one line", "x = '''abc\n", SyntaxError{Name: "SyntaxError", Msg: "unterminated triple-quoted string literal (detected at line 1)", Line: 1, Column: 5}},
	{"mismatched bracket", "x = (1, 2]\n", SyntaxError{Name: "SyntaxError", Msg: "closing parenthesis ']' does not match opening parenthesis '('", Line: 1, Column: 10}},
	{"mismatched nested", "a = {'k': [1, 2)}\n", SyntaxError{Name: "SyntaxError", Msg: "closing parenthesis ')' does not match opening parenthesis '['", Line: 1, Column: 16}},
	{"mismatched other line", "a = [1,\n 2)\n", SyntaxError{Name: "SyntaxError", Msg: "closing parenthesis ')' does not match opening parenthesis '[' on line 1", Line: 2, Column: 3}},
	{"unmatched", "x = 1)\n", SyntaxError{Name: "SyntaxError", Msg: "unmatched ')'", Line: 1, Column: 6}},
	{"backslash junk", "x = \\ 1\n", SyntaxError{Name: "SyntaxError", Msg: "unexpected character after line continuation character", Line: 1, Column: 6}},
	{"missing colon", "if x\n    pass\n", SyntaxError{Name: "SyntaxError", Msg: "invalid syntax", Line: 1, Column: 1}},
	{"missing block", "for i in range(3):\nprint(i)\n", SyntaxError{Name: "IndentationError", Msg: "expected an indented block after 'for' statement on line 1", Line: 2, Column: 1}},
	{"missing block at eof", "if x:\n", SyntaxError{Name: "IndentationError", Msg: "expected an indented block after 'if' statement on line 1", Line: 1, Column: 6}},
	{"missing block before comment", "if x:\n\n# c\n", SyntaxError{Name: "IndentationError", Msg: "expected an indented block after 'if' statement on line 1", Line: 3, Column: 4}},
	{"missing function body", "def f():\nreturn 1\n", SyntaxError{Name: "IndentationError", Msg: "expected an indented block after function definition on line 1", Line: 2, Column: 1}},
	{"missing try body", "try:\nexcept ImportError:\n    pass\n", SyntaxError{Name: "IndentationError", Msg: "expected an indented block after 'try' statement on line 1", Line: 2, Column: 1}},
	{"missing else body", "if x:\n    pass\nelse:\n", SyntaxError{Name: "IndentationError", Msg: "expected an indented block after 'else' statement on line 3", Line: 3, Column: 6}},
	{"unexpected indent first line", "  x = 1\n", SyntaxError{Name: "IndentationError", Msg: "unexpected indent", Line: 1, Column: 2}},
	{"unexpected indent", "x = 1\n    y = 2\n", SyntaxError{Name: "IndentationError", Msg: "unexpected indent", Line: 2, Column: 4}},
	{"bad dedent", "def f():\n  if x:\n      y\n    z\n", SyntaxError{Name: "IndentationError", Msg: "unindent does not match any outer indentation level", Line: 4, Column: 6}},
	{"bad dedent in class", "class A:\n    def f(self):\n        pass\n  x = 1\n", SyntaxError{Name: "IndentationError", Msg: "unindent does not match any outer indentation level", Line: 4, Column: 8}},
	{"tabs and spaces", "if True:\n\tx = 1\n        y = 2\n", SyntaxError{Name: "TabError", Msg: "inconsistent use of tabs and spaces in indentation", Line: 3, Column: 1}},
	{"invalid character", "€ = 2\n", SyntaxError{Name: "SyntaxError", Msg: "invalid syntax", Line: 1, Column: 1}},
	{"incomplete import", "import pandas as\n", SyntaxError{Name: "SyntaxError", Msg: "invalid syntax", Line: 1}},
	{"from without names", "from . import\n", SyntaxError{Name: "SyntaxError", Msg: "invalid syntax", Line: 1}},
	{"crlf never closed", "x = 1\r\nprint(x\r\n", SyntaxError{Name: "SyntaxError", Msg: "'(' was never closed", Line: 2, Column: 6}},
	{"nesting limit", strings.Repeat("(", 201) + strings.Repeat(")", 201) + "\n", SyntaxError{Name: "SyntaxError", Msg: "too many nested parentheses", Line: 1, Column: 201}},
	{"indent before tokenizer error", "  x = 1\ny = 'abc\n", SyntaxError{Name: "IndentationError", Msg: "unexpected indent", Line: 1, Column: 2}},
}

// validCases are code CPython 3.11 compiles; the router must not call any of it an error.
var validCases = []struct{ name, code string }{
	{"empty", ""},
	{"comment only", "# nothing\n"},
	{"no trailing newline", "if x:\n    pass"},
	{"match statement", "match cmd:\n    case [\"go\", d]:\n        print(d)\n    case _:\n        pass\n"},
	{"match as a name", "match = 1\nmatch += 1\nprint(match)\n"},
	{"walrus", "if (n := 10) > 5:\n    print(n)\n"},
	{"fstring format spec", "w = 5\nx = 3\nprint(f\"{x!r:>{w}}\")\n"},
	{"fstring equals", "x = 1\nprint(f\"{x=}\")\n"},
	{"continuation lines", "total = 1 + \\\n    2 + \\\n    3\n"},
	{"dedented continuation in brackets", "def f():\n    return (1 +\n2)\n"},
	{"brackets across lines", "d = {\n  'a': [1,\n        2],\n}\n"},
	{"decorators and async", "import asyncio\n@staticmethod\nasync def f():\n    async with a as b:\n        pass\n    return [x async for x in g()]\n"},
	{"tabs consistently", "if True:\n\tx = 1\n\tif x:\n\t\ty = 2\n"},
	{"crlf", "if True:\r\n    x = 1\r\n"},
	{"unicode identifiers", "café = 1\nπ = 3.14\nprint(café, π)\n"},
	{"string with brackets and hash", "s = '(# not a comment ['\nt = \"\"\"\n)]}\n\"\"\"\n"},
	{"raw string backslash quote", "r = r'\\''\np = r\"\\\\\"\n"},
	{"lambda and slices", "f = lambda: 1\nx = [1, 2, 3][1:]\nd = {1: 2}\n"},
	{"one line compound", "if x: pass\nfor i in y: print(i)\nclass A: ...\n"},
	{"blank lines inside block", "def f():\n    x = 1\n\n\n    return x\n"},
	{"form feed", "x = 1\n\f\ny = 2\n"},
	{"semicolons", "a = 1; b = 2\n"},
	{"star expressions", "a, *b = [1, 2, 3]\nprint(*b, **{})\n"},
	{"except star", "try:\n    pass\nexcept* ValueError:\n    pass\n"},
	{"global nonlocal", "def f():\n    global g\n    def h():\n        nonlocal_x = 1\n"},
}

func TestSyntaxErrors(t *testing.T) {
	for _, c := range syntaxCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := Analyze([]byte(c.code))
			if a.Err == nil {
				t.Fatalf("no error found (doubt: %v)", a.Doubt)
			}
			got := *a.Err
			got.Text = ""
			want := c.want
			if want.Column == 0 {
				got.Column = 0
			}
			if got != want {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
	for _, c := range validCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if a := Analyze([]byte(c.code)); a.Err != nil {
				t.Errorf("valid code reported as %s: %v", a.Err.Name, a.Err)
			}
		})
	}
}

// The grammar is tree-sitter's and reads some valid code wrongly; those errors are doubts, not
// reported.
func TestSyntaxDoubts(t *testing.T) {
	for _, code := range []string{
		"print(f\"{ticklabels:=} must be a sequence\")\n", // a format spec tree-sitter reads as :=
		"def f():\n    (bar.\nbaz)\n    return 1\n",       // a dedented line inside brackets
	} {
		a := Analyze([]byte(code))
		if a.Err != nil {
			t.Errorf("%q: reported %v; it is valid Python", code, a.Err)
		}
	}
}

// Broken code that tree-sitter's error recovery takes minutes over is cut off at the parse budget;
// the code then runs and the interpreter reports.
func TestParseBudget(t *testing.T) {
	src := []byte(strings.Repeat("def (:\n  ]]\n", 30000)) // 350 KB; minutes unbounded
	start := time.Now()
	a := Analyze(src)
	took := time.Since(start)
	if !a.Unread || a.Err != nil {
		t.Errorf("unread %v, error %v; want an unread analysis without a reported error", a.Unread, a.Err)
	}
	if budget := parseBudget(len(src)); took > 2*budget+time.Second {
		t.Errorf("took %v, budget %v", took, budget)
	}
	d, err := New(fixtureOptions(t)).Route(&sandbox.RunRequest{Code: string(src), Tier: sandbox.TierAuto})
	if err != nil || d.Tier != nanoTier || !strings.Contains(strings.Join(d.Reasons, "\n"), "its imports are unknown") {
		t.Errorf("routed %+v, %v", d, err)
	}
}

func TestSyntaxErrorTraceback(t *testing.T) {
	a := Analyze([]byte("import json\nprint(json.dumps(1)\n"))
	if a.Err == nil {
		t.Fatal("no error")
	}
	pe := a.Err.PyError()
	want := "  File \"<string>\", line 2\n    print(json.dumps(1)\n         ^\nSyntaxError: '(' was never closed\n"
	if pe.Name != "SyntaxError" || pe.Value != "'(' was never closed (line 2, column 6)" || pe.Traceback != want {
		t.Errorf("got %+v\nwant traceback:\n%s", pe, want)
	}
}

// python311 returns a CPython 3.11 on this machine, or skips: the cross-checks compare with the
// interpreter the tiers run.
func python311(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3 (3.11) to compare with")
	}
	out, err := exec.Command(py, "-c", "import sys; print(sys.version_info[:2] == (3, 11))").Output()
	if err != nil || strings.TrimSpace(string(out)) != "True" {
		t.Skip("needs python3 3.11 to compare with")
	}
	return py
}

// cpythonErrors compiles each source with CPython and returns its SyntaxError, or nil.
func cpythonErrors(t *testing.T, py string, sources []string) []*SyntaxError {
	t.Helper()
	script := `import json, sys
out = []
for src in json.load(sys.stdin):
    try:
        compile(src, "<string>", "exec")
        out.append(None)
    except SyntaxError as e:
        out.append({"Name": type(e).__name__, "Msg": e.msg, "Line": e.lineno, "Column": e.offset or 0})
    except ValueError as e:
        out.append({"Name": "ValueError", "Msg": str(e)})
json.dump(out, sys.stdout)
`
	in, _ := json.Marshal(sources)
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = strings.NewReader(string(in))
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	var out []*SyntaxError
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Every case here, and every snippet, as CPython judges it: what the router reports must be what
// CPython raises (class and line always; message and column where the error is one of the rules
// the scan implements), and code CPython compiles must never be reported.
func TestSyntaxMatchesCPython(t *testing.T) {
	py := python311(t)
	var srcs, names []string
	for _, c := range syntaxCases {
		srcs, names = append(srcs, c.code), append(names, c.name)
	}
	for _, c := range validCases {
		srcs, names = append(srcs, c.code), append(names, c.name)
	}
	for _, s := range loadSnippets(t) {
		srcs, names = append(srcs, s.code), append(names, "snippet "+s.name)
	}
	want := cpythonErrors(t, py, srcs)
	for i, src := range srcs {
		got := Analyze([]byte(src)).Err
		w := want[i]
		switch {
		case got == nil:
			continue // not reported: the interpreter decides, whatever it says
		case w == nil:
			t.Errorf("%s: reported %s %v; CPython compiles it", names[i], got.Name, got)
		case got.Name != w.Name || got.Line != w.Line:
			t.Errorf("%s: reported %s at line %d; CPython says %s %q at line %d", names[i], got.Name, got.Line, w.Name, w.Msg, w.Line)
		case got.Msg != "invalid syntax" && (got.Msg != w.Msg || got.Column != w.Column):
			t.Errorf("%s: reported %q at column %d; CPython says %q at column %d", names[i], got.Msg, got.Column, w.Msg, w.Column)
		}
	}
}

// A real code base, the standard library of the CPython on this machine (and of the heavy image),
// must parse without a single error reported: the router's promise is no false syntax errors.
// Files CPython itself rejects are the exceptions, and are checked to be rejected.
func TestNoFalseErrorsInStdlib(t *testing.T) {
	if testing.Short() {
		t.Skip("parses the whole standard library")
	}
	py := python311(t)
	out, err := exec.Command(py, "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))").Output()
	if err != nil {
		t.Fatal(err)
	}
	root := strings.TrimSpace(string(out))
	var flagged []string
	var srcs []string
	n := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "site-packages" || d.Name() == "test" || d.Name() == "tests" || d.Name() == "idle_test") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".py") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		if a := Analyze(src); a.Err != nil {
			flagged, srcs = append(flagged, path+": "+a.Err.Error()), append(srcs, string(src))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 500 {
		t.Fatalf("only %d files under %s", n, root)
	}
	if len(srcs) > 0 {
		for i, w := range cpythonErrors(t, py, srcs) {
			if w == nil {
				t.Errorf("%s: CPython compiles this file", flagged[i])
			}
		}
	}
	t.Logf("%d files, %d reported (all rejected by CPython too)", n, len(flagged))
}
