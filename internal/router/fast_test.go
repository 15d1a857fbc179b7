package router

import (
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The fast path's promise: when it decides, its analysis is tree-sitter's, field by field
// (imports and what encloses them, skipped imports, uses, dynamic calls, no error); when it
// cannot be sure, it says so and the router asks tree-sitter. These tests hold it to that over
// the fixtures, generated programs, mutations of both, and the standard library.

// routerTargets are the targets a Router built from the fixtures judges conditions against.
func routerTargets(t testing.TB) []Target {
	return New(fixtureOptions(t)).targets
}

// sameAsTree checks src: if the fast path decides, with or without targets, its analysis must be
// tree-sitter's. It reports whether the fast path decided.
func sameAsTree(t *testing.T, name string, src []byte, targets []Target) bool {
	t.Helper()
	decided := false
	for _, tg := range [][]Target{nil, targets} {
		fast, _ := analyzeFast(src, tg)
		if fast == nil {
			continue
		}
		decided = true
		if tree := analyze(src, time.Minute, tg...); !reflect.DeepEqual(fast, tree) {
			t.Errorf("%s: the fast path and tree-sitter disagree (targets %v)\n%s\nfast: %+v\ntree: %+v", name, tg, src, fast, tree)
			return decided
		}
	}
	return decided
}

// Every fixture, every syntax case and the benchmark's script; the fast path must decide every
// snippet that compiles and the benchmark's script (it is there to serve them).
func TestFastMatchesTree(t *testing.T) {
	targets := routerTargets(t)
	for _, s := range loadSnippets(t) {
		if !sameAsTree(t, s.name, []byte(s.code), targets) && s.err == "" {
			t.Errorf("%s: the fast path did not decide a valid snippet", s.name)
		}
	}
	for _, c := range syntaxCases {
		if sameAsTree(t, c.name, []byte(c.code), targets) {
			t.Errorf("%s: the fast path decided code with a syntax error", c.name)
		}
	}
	for _, c := range validCases {
		sameAsTree(t, c.name, []byte(c.code), targets)
	}
	src, err := os.ReadFile("testdata/bench/agent_1000.py")
	if err != nil {
		t.Fatal(err)
	}
	if !sameAsTree(t, "agent_1000.py", src, targets) {
		t.Error("the fast path did not decide the benchmark's script")
	}
}

// Decisions, not only analyses: every snippet and generated program routes the same way with and
// without tree-sitter, reasons and all.
func TestFastRoutesAsTree(t *testing.T) {
	fast, tree := New(fixtureOptions(t)), New(fixtureOptions(t))
	tree.treeOnly = true
	// The two readings are compared, not the parse's time budget (TestParseBudget's): on a
	// loaded machine a tree-sitter parse can outlast 100 ms and make one side unread.
	fast.budget, tree.budget = time.Minute, time.Minute
	var codes []string
	for _, s := range loadSnippets(t) {
		codes = append(codes, s.code)
	}
	for seed := range int64(500) {
		codes = append(codes, genProgram(seed))
	}
	for _, code := range codes {
		for _, tier := range []sandbox.Tier{sandbox.TierAuto, nanoTier} {
			req := &sandbox.RunRequest{Code: code, Tier: tier}
			d1, err1 := fast.Route(req)
			d2, err2 := tree.Route(req)
			if !reflect.DeepEqual(d1, d2) || (err1 == nil) != (err2 == nil) || err1 != nil && err1.Error() != err2.Error() {
				t.Errorf("%s routes differently:\n%s\nfast: %+v %v\ntree: %+v %v", tier, code, d1, err1, d2, err2)
			}
		}
	}
}

// Generated programs: what the rules look at, in every context, with the corners the fast path
// must refuse (pygen).
func TestFastGenerated(t *testing.T) {
	targets := routerTargets(t)
	n, decided := 3000, 0
	if testing.Short() {
		n = 500
	}
	for seed := range int64(n) {
		if sameAsTree(t, "generated", []byte(genProgram(seed)), targets) {
			decided++
		}
	}
	t.Logf("%d of %d generated programs decided without tree-sitter", decided, n)
	if decided < n/10 {
		t.Errorf("only %d of %d decided: the generator or the fast path went wrong", decided, n)
	}
}

// Mutations of valid programs (a token deleted or repeated, a keyword, bracket, line break,
// indentation or comment inserted): mostly invalid code, where tree-sitter reports an error
// or reads the code another way; the fast path must then be unsure, never different.
func TestFastMutations(t *testing.T) {
	targets := routerTargets(t)
	var bases [][]byte
	for _, s := range loadSnippets(t) {
		bases = append(bases, []byte(s.code))
	}
	for seed := range int64(1000) {
		if src := []byte(genProgram(seed)); func() bool { a, _ := analyzeFast(src, nil); return a != nil }() {
			bases = append(bases, src)
		}
	}
	r := rand.New(rand.NewSource(1))
	n, decided := 20000, 0
	if testing.Short() {
		n = 3000
	}
	for range n {
		src := mutate(r, bases[r.Intn(len(bases))])
		if sameAsTree(t, "mutated", src, targets) {
			decided++
		}
	}
	t.Logf("%d of %d mutated programs decided without tree-sitter", decided, n)
}

var insertions = []string{"(", ")", "[", "]", "{", "}", ":", ",", ".", ";", "=", "==", "*", "**", "\n", "\n    ",
	"\n  ", "  # c\n", "# c\n", "\\\n", "'", "\"", "\"\"\"", "if ", " else ", "not ", "lambda ", "for ", " in ", "import ",
	"from ", "as ", "async ", "await ", "yield ", "return ", "@", "->", ":=", "f'{x}'", "try:", "except:", "with ",
	"def ", "class ", "print ", "match ", "case ", "type ", "0", "1.5", "x", "__import__", "import_module", "threading",
	"os", "\t", "!", "`", "...", "del ", "global ", "pass", "raise ", "-> None: x[a]", ": a[b] + c", "except* "}

// mutate changes src at one or two of its tokens.
func mutate(r *rand.Rand, src []byte) []byte {
	var o lexOut
	scanTokens(src, &o)
	var cuts []int
	for _, t := range o.toks {
		cuts = append(cuts, int(t.start), int(t.end))
	}
	for _, c := range o.comments {
		cuts = append(cuts, int(c.start))
	}
	if len(o.toks) == 0 {
		return src
	}
	out := append([]byte(nil), src...)
	for n := 1 + r.Intn(2); n > 0; n-- {
		t := o.toks[r.Intn(len(o.toks))]
		if int(t.end) > len(out) {
			continue
		}
		switch r.Intn(5) {
		case 0:
			out = append(out[:t.start:t.start], out[t.end:]...)
		case 1:
			out = append(out[:t.end:t.end], append(append([]byte(nil), out[t.start:t.end]...), out[t.end:]...)...)
		default:
			if at := cuts[r.Intn(len(cuts))]; at <= len(out) {
				out = append(out[:at:at], append([]byte(insertions[r.Intn(len(insertions))]), out[at:]...)...)
			}
		}
	}
	return out
}

// The standard library of the CPython on this machine (tests included: they hold odd code), and
// the directories in AGENTBOX_ROUTER_CORPUS (colon-separated; the heavy image's dist-packages,
// say): real code must be decided nearly always, and always as tree-sitter decides it.
func TestFastCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("reads the whole standard library twice")
	}
	var dirs []string
	if py, err := exec.LookPath("python3"); err == nil {
		if out, err := exec.Command(py, "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))").Output(); err == nil {
			dirs = append(dirs, strings.TrimSpace(string(out)))
		}
	}
	if extra := os.Getenv("AGENTBOX_ROUTER_CORPUS"); extra != "" {
		dirs = append(dirs, filepath.SplitList(extra)...)
	}
	if len(dirs) == 0 {
		t.Skip("no python3 for a standard library to read")
	}
	targets := routerTargets(t)
	n, decided := 0, 0
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".py") || strings.Contains(path, "site-packages") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			n++
			if fast, _ := analyzeFast(src, targets); fast != nil {
				decided++
				if tree := analyze(src, time.Minute, targets...); !reflect.DeepEqual(fast, tree) {
					t.Errorf("%s: the fast path and tree-sitter disagree\nfast: %+v\ntree: %+v", path, fast, tree)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d files, %d decided without tree-sitter", n, decided)
	if n < 500 || decided < n*95/100 {
		t.Errorf("%d of %d files decided: want 95%%", decided, n)
	}
}

// The corners where tree-sitter reads valid Python with an error, or reads it another way, each
// behind a rule of the fast path: it must be unsure there (and tree-sitter must indeed report
// something, or the rule is not needed). And corners it decides, as tree-sitter does.
func TestFastCorners(t *testing.T) {
	targets := routerTargets(t)
	for _, c := range []struct {
		name, code string
		unsure     bool // the fast path must leave it to tree-sitter
		treeErr    bool // tree-sitter reports an error or a doubt on this valid code
	}{
		{"return annotation, body on its line", "def f() -> None: c[a]\n", true, true},
		{"return annotation, other bodies on its line", "def f() -> None: ...\ndef g() -> X: c.d[e] = 1\ndef h() -> X: return c[a]\n", false, false},
		{"generic annotation then an operator", "x: a[b] + c\n", true, true},
		{"slice in an annotation", "x: a[::2]\n", true, true},
		{"annotations in the typing style", "def f(a: dict[str, list[int]] = {}, *b: tuple[int, ...]) -> list[int] | None:\n    x: Callable[[int], str] = g\n", false, false},
		{"comment left of a decorated definition", "class A:\n    @property\n# c\n    def f(self):\n        pass\n", true, true},
		{"comment left of the block inside brackets", "if x:\n    y = (1 +\n# c\n     2)\n", true, true},
		{"dedented line inside brackets", "def f():\n    (bar.\nbaz)\n    return 1\n", true, true},
		{"walrus read in a format spec", "x = 1\nprint(f\"{x:=}\")\n", true, true},
		{"line continuation in a condition", "import sys\nif sys.version_info \\\n >= (3, 11):\n    import tomllib\nelse:\n    import tomli\n", true, false},
		{"bare except with a comment", "try:\n    import numpy\nexcept:  # no numpy\n    numpy = None\n", false, false},
		{"bare except without one", "try:\n    import numpy\nexcept:\n    numpy = None\n", false, false},
		{"comment after a handler's block", "try:\n    import numpy\nexcept ImportError:\n    np = None\n    # raise later\n# raise\nx = 1\n", false, false},
		{"starred comprehension body", "[*a for a in b]\n", true, false},
		{"except star", "try:\n    pass\nexcept* ValueError:\n    pass\n", true, false},
		{"match statement", "match x:\n    case [1, y]:\n        pass\n", true, false},
		{"tab indentation", "if True:\n\timport json\n", true, false},
		{"lone carriage return", "import json\rimport numpy\n", true, false},
		{"non-ASCII name", "café = 1\n", true, false},
		{"NUL in a comment", "import json  # \x00\n", true, true},
		{"import call and its uses", "import importlib as il\nm = il.import_module('.sub', 'pkg')\n__import__('os').system('x')\n", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			fast, why := analyzeFast([]byte(c.code), targets)
			if c.unsure != (fast == nil) {
				t.Errorf("unsure = %v (%s), want %v", fast == nil, why, c.unsure)
			}
			sameAsTree(t, c.name, []byte(c.code), targets)
			tree := analyze([]byte(c.code), time.Minute, targets...)
			if got := tree.Err != nil || tree.Doubt != nil; got != c.treeErr {
				t.Errorf("tree-sitter reports %v / %v, want an error or doubt: %v", tree.Err, tree.Doubt, c.treeErr)
			}
		})
	}
}

// FuzzFastPath runs the promise on what the fuzzer makes of the fixtures:
//
//	go test -run XXX -fuzz FuzzFastPath ./internal/router
func FuzzFastPath(f *testing.F) {
	for _, s := range loadSnippets(f) {
		f.Add(s.code)
	}
	for seed := range int64(50) {
		f.Add(genProgram(seed))
	}
	targets := routerTargets(f)
	f.Fuzz(func(t *testing.T, code string) {
		if len(code) > 4096 {
			return
		}
		sameAsTree(t, "fuzzed", []byte(code), targets)
	})
}
