package router

import (
	"bytes"
	"strings"

	sitter "github.com/tree-sitter/go-tree-sitter"
)

// walker collects imports. Rather than visit every node of the tree (each visit is a cgo call,
// and a 1,000-line file has tens of thousands of nodes), it finds the places in the source where
// an import can be (the word "import", "__import__", "import_module") and asks the tree what is
// there: a keyword of an import statement, a call, or text inside a string or comment.
type walker struct {
	src     []byte
	a       *Analysis
	targets []Target
	// importlib holds the names the importlib module is bound to ("importlib", or an alias).
	importlib []string
}

var (
	wordImport       = []byte("import")
	wordDunderImport = []byte("__import__")
	wordImportModule = []byte("import_module")
)

func (w *walker) imports(root *sitter.Node) {
	w.importlib = []string{"importlib"}
	for _, off := range words(w.src, wordImport) {
		n := root.DescendantForByteRange(uint(off), uint(off+len(wordImport)))
		if n == nil || n.Kind() != "import" {
			continue // in a string, a comment, or an error
		}
		st := n.Parent()
		if st == nil {
			continue
		}
		switch st.Kind() {
		case "import_statement":
			w.importStatement(st)
		case "import_from_statement":
			w.fromStatement(st)
		case "future_import_statement":
			w.add(st, Import{Module: "__future__", Line: line(st)})
		}
	}
	if bytes.Contains(w.src, wordDunderImport) || bytes.Contains(w.src, wordImportModule) {
		w.calls(root, wordDunderImport)
		w.calls(root, wordImportModule)
	}
}

// words returns the offsets of word in src where it stands as a whole word.
func words(src, word []byte) []int {
	var out []int
	for i := 0; ; {
		j := bytes.Index(src[i:], word)
		if j < 0 {
			return out
		}
		at := i + j
		end := at + len(word)
		if (at == 0 || !isWordByte(src[at-1])) && (end == len(src) || !isWordByte(src[end])) {
			out = append(out, at)
		}
		i = end
	}
}

func line(n *sitter.Node) int { return int(n.StartPosition().Row) + 1 }

// importStatement: import a.b as c, d
func (w *walker) importStatement(st *sitter.Node) {
	for i := uint(0); i < st.NamedChildCount(); i++ {
		c := st.NamedChild(i)
		name := c
		if c.Kind() == "aliased_import" {
			name = c.ChildByFieldName("name")
			if alias := c.ChildByFieldName("alias"); alias != nil && name != nil && w.text(name) == "importlib" {
				w.importlib = append(w.importlib, w.text(alias))
			}
		}
		if name == nil || name.Kind() != "dotted_name" {
			continue
		}
		w.add(st, Import{Module: w.text(name), Line: line(st)})
	}
}

// fromStatement: from .x import y; from x import (a, b); from x import *
func (w *walker) fromStatement(st *sitter.Node) {
	mod := st.ChildByFieldName("module_name")
	if mod == nil {
		return
	}
	imp := Import{Module: w.text(mod), Line: line(st)}
	for i := uint(0); i < st.NamedChildCount(); i++ {
		c := st.NamedChild(i)
		if c.Id() == mod.Id() {
			continue
		}
		switch c.Kind() {
		case "dotted_name":
			imp.Names = append(imp.Names, w.text(c))
		case "aliased_import":
			if n := c.ChildByFieldName("name"); n != nil {
				imp.Names = append(imp.Names, w.text(n))
			}
		}
	}
	w.add(st, imp)
}

// calls finds __import__("m") and importlib.import_module("m") calls at the occurrences of fn.
func (w *walker) calls(root *sitter.Node, fn []byte) {
	for _, off := range words(w.src, fn) {
		n := root.DescendantForByteRange(uint(off), uint(off+len(fn)))
		if n == nil || n.Kind() != "identifier" {
			continue
		}
		callee := n
		p := n.Parent()
		if p != nil && p.Kind() == "attribute" {
			// importlib.import_module, builtins.__import__, importlib.__import__
			if obj := p.ChildByFieldName("object"); string(fn) == "import_module" && (obj == nil || !w.isImportlib(obj)) {
				continue
			}
			callee, p = p, p.Parent()
		}
		if p == nil || p.Kind() != "call" {
			continue
		}
		if f := p.ChildByFieldName("function"); f == nil || f.Id() != callee.Id() {
			continue
		}
		args := p.ChildByFieldName("arguments")
		if args == nil || args.Kind() != "argument_list" || args.NamedChildCount() == 0 {
			w.a.Dynamic++
			continue
		}
		name, ok := w.literal(args.NamedChild(0))
		if !ok {
			w.a.Dynamic++
			continue
		}
		if strings.HasPrefix(name, ".") && string(fn) == "import_module" && args.NamedChildCount() > 1 {
			// import_module(".sub", "pkg") is pkg.sub
			if pkg, ok := w.literal(args.NamedChild(1)); ok {
				name = resolveRelative(name, pkg)
			}
		}
		if name == "" {
			w.a.Dynamic++
			continue
		}
		w.add(p, Import{Module: name, Line: line(p)})
	}
}

func (w *walker) isImportlib(n *sitter.Node) bool {
	if n.Kind() != "identifier" {
		return false
	}
	t := w.text(n)
	for _, name := range w.importlib {
		if t == name {
			return true
		}
	}
	return false
}

// literal returns the value of a plain string literal that looks like a module name.
func (w *walker) literal(n *sitter.Node) (string, bool) {
	if n == nil || n.Kind() != "string" {
		return "", false
	}
	return literalName(string(w.src[n.StartByte():n.EndByte()]))
}

// literalName returns the value of the string literal s, as written, if it looks like a module
// name: f-strings, bytes and names with escapes are not names.
func literalName(s string) (string, bool) {
	i := strings.IndexAny(s, `"'`)
	if i < 0 || strings.ContainsAny(strings.ToLower(s[:i]), "fb") {
		return "", false // f-strings and bytes are not names
	}
	q := s[i:]
	for _, quote := range []string{`"""`, `'''`, `"`, `'`} {
		if len(q) >= 2*len(quote) && strings.HasPrefix(q, quote) && strings.HasSuffix(q, quote) {
			q = q[len(quote) : len(q)-len(quote)]
			break
		}
	}
	if !isModuleName(q) {
		return "", false
	}
	return q, true
}

// isModuleName accepts dotted identifiers, with leading dots for relative names.
func isModuleName(s string) bool {
	s = strings.TrimLeft(s, ".")
	if s == "" {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if part == "" || part[0] >= '0' && part[0] <= '9' {
			return false
		}
		for i := 0; i < len(part); i++ {
			if !isWordByte(part[i]) {
				return false
			}
		}
	}
	return true
}

// resolveRelative resolves a relative module name against a package, as importlib does.
func resolveRelative(name, pkg string) string {
	level := len(name) - len(strings.TrimLeft(name, "."))
	parts := strings.Split(pkg, ".")
	if level-1 > len(parts)-1 {
		return ""
	}
	base := strings.Join(parts[:len(parts)-(level-1)], ".")
	if rest := name[level:]; rest != "" {
		return base + "." + rest
	}
	return base
}

// text returns a node's source with whitespace and line continuations removed: `a . b` is a.b.
func (w *walker) text(n *sitter.Node) string {
	return compact(w.src[n.StartByte():n.EndByte()])
}

// compact returns source with whitespace and line continuations removed.
func compact(b []byte) string {
	if bytes.IndexAny(b, " \t\\\r\n") < 0 {
		return string(b)
	}
	var out []byte
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\\' && c != '\r' && c != '\n' {
			out = append(out, c)
		}
	}
	return string(out)
}

// add records an import found at node n, after looking at what encloses it.
func (w *walker) add(n *sitter.Node, imp Import) {
	optional, dead := w.context(n)
	imp.Optional = optional
	if dead {
		w.a.Skipped = append(w.a.Skipped, imp)
		return
	}
	w.a.Imports = append(w.a.Imports, imp)
}

// context walks up from n: an enclosing try that catches ImportError, a handler of ImportError or
// a `with suppress(ImportError)` make the import optional; a branch of an if whose condition is
// false on every target makes it dead.
func (w *walker) context(n *sitter.Node) (optional, dead bool) {
	child := n
	for p := n.Parent(); p != nil; child, p = p, p.Parent() {
		switch p.Kind() {
		case "try_statement":
			if body := p.ChildByFieldName("body"); body != nil && body.Id() == child.Id() {
				optional = optional || w.catchesImportError(p)
			}
		case "except_clause", "except_group_clause":
			optional = optional || w.handlesImportError(p, false)
		case "with_statement":
			if body := p.ChildByFieldName("body"); body != nil && body.Id() == child.Id() {
				optional = optional || w.suppressesImportError(p)
			}
		case "if_statement":
			dead = dead || w.deadBranch(p, child)
		}
	}
	return optional, dead
}

// catchesImportError reports whether a try statement has a handler that catches ImportError.
func (w *walker) catchesImportError(try *sitter.Node) bool {
	for i := uint(0); i < try.NamedChildCount(); i++ {
		c := try.NamedChild(i)
		if (c.Kind() == "except_clause" || c.Kind() == "except_group_clause") && w.handlesImportError(c, true) {
			return !w.givesUp(c)
		}
	}
	return false
}

// givesUp reports whether an except clause ends the program or raises rather than carrying on
// without the module (`except ImportError: sys.exit("pip install numpy")`): the import is then
// needed, not optional. The clause's text is searched, strings and all, so a message that
// mentions raise counts too; that errs towards the tier that has the module.
func (w *walker) givesUp(clause *sitter.Node) bool {
	return givesUp(w.src[clause.StartByte():clause.EndByte()])
}

// givesUp reports whether the source of an except clause raises or exits.
func givesUp(b []byte) bool {
	if len(words(b, []byte("raise"))) > 0 {
		return true
	}
	for _, call := range []string{"exit(", "quit(", "abort(", "SystemExit"} {
		if bytes.Contains(b, []byte(call)) {
			return true
		}
	}
	return false
}

// handlesImportError reports whether an except clause catches ImportError; broad also counts
// Exception, BaseException and a bare except (what a try's body may fail with; a handler's own
// imports are only optional under an ImportError handler).
func (w *walker) handlesImportError(clause *sitter.Node, broad bool) bool {
	var types *sitter.Node
	for i := uint(0); i < clause.NamedChildCount(); i++ {
		c := clause.NamedChild(i)
		if c.Kind() != "block" {
			types = c
			break
		}
	}
	if types == nil {
		return broad // bare except
	}
	if types.Kind() == "as_pattern" && types.NamedChildCount() > 0 {
		types = types.NamedChild(0)
	}
	names := []*sitter.Node{types}
	if types.Kind() == "tuple" || types.Kind() == "parenthesized_expression" {
		names = names[:0]
		for i := uint(0); i < types.NamedChildCount(); i++ {
			names = append(names, types.NamedChild(i))
		}
	}
	for _, n := range names {
		if catches(w.text(n), broad) {
			return true
		}
	}
	return false
}

// catches reports whether an exception type, as compact source, is ImportError (or, if broad,
// Exception or BaseException).
func catches(t string, broad bool) bool {
	if i := strings.LastIndexByte(t, '.'); i >= 0 {
		t = t[i+1:] // builtins.ImportError
	}
	switch t {
	case "ImportError", "ModuleNotFoundError":
		return true
	case "Exception", "BaseException":
		return broad
	}
	return false
}

// suppressesImportError reports whether a with statement is `with suppress(ImportError)` (or
// contextlib.suppress).
func (w *walker) suppressesImportError(with *sitter.Node) bool {
	s := string(w.src[with.StartByte():with.EndByte()])
	if b := with.ChildByFieldName("body"); b != nil {
		s = string(w.src[with.StartByte():b.StartByte()])
	}
	return suppresses(s)
}

// suppresses reports whether the head of a with statement, as source, suppresses ImportError.
func suppresses(s string) bool {
	return strings.Contains(s, "suppress(") && (strings.Contains(s, "ImportError") || strings.Contains(s, "ModuleNotFoundError"))
}
