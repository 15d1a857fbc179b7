package router

import (
	"bytes"
	"slices"
	"sync"
)

// The fast path. tree-sitter's parse of a 1,000-line script costs about 6 ms here, most of
// routing; the scan that checks syntax (scan.go) already reads every token in a fraction of
// that. So the router first reads the scan's tokens with a parser of its own (fastparse.go) and
// decides from them, by the same rules, what the walker would decide from the tree: the imports
// and what encloses them, the import calls, the uses. It asks tree-sitter only when that reading
// is unsure: a syntax error or anything the scan flags, code outside the parser's subset of
// tree-sitter-python's grammar, a comment where tree-sitter would make it a node the rules look
// at. Tests check, over the fixtures, generated code and the standard library, that whenever the
// fast path decides, tree-sitter's analysis is the same.

// lexPool keeps token buffers between requests: a 1,000-line script has about 8,000 tokens.
var lexPool = sync.Pool{New: func() any { return new(lexOut) }}

const maxPooledToks = 1 << 16

// analyzeFast is Analyze without tree-sitter, or nil with the reason when it cannot be sure.
func analyzeFast(src []byte, targets []Target) (a *Analysis, unsure string) {
	if bytes.IndexByte(src, 0) >= 0 {
		return nil, "a NUL byte" // the end of the input to tree-sitter's lexer, wherever it is
	}
	if i := bytes.IndexByte(src, '\r'); i >= 0 {
		for ; i >= 0; i = indexFrom(src, i+1, '\r') {
			if i+1 >= len(src) || src[i+1] != '\n' {
				// CPython ends a line at a lone CR, tree-sitter does not: their lines differ.
				return nil, "a carriage return without a line feed"
			}
		}
	}
	out := lexPool.Get().(*lexOut)
	if want := len(src)/4 + 64; cap(out.toks) < want {
		out.toks = make([]tok, 0, want) // code has about a token per 4 bytes
	}
	defer func() {
		if cap(out.toks) > maxPooledToks {
			return // a buffer for a megabyte of code is not worth keeping
		}
		*out = lexOut{toks: out.toks[:0], comments: out.comments[:0], conts: out.conts[:0]}
		lexPool.Put(out)
	}()
	sr := scanTokens(src, out)
	switch {
	case sr.lexErr != nil || sr.blockErr != nil || sr.unclosed != nil:
		return nil, "a syntax error" // tree-sitter's reading decides what to report (syntaxError)
	case len(sr.oddIndent) > 0:
		return nil, "a line dedented inside brackets" // where tree-sitter reads a dedent
	case out.unsure != "":
		return nil, out.unsure
	}
	p := parser{src: src, toks: out.toks, comments: out.comments, conts: out.conts}
	defer func() {
		if r := recover(); r != nil {
			b, ok := r.(bail)
			if !ok {
				panic(r)
			}
			a, unsure = nil, b.why
		}
	}()
	p.file()
	return p.analysis(targets), ""
}

func indexFrom(b []byte, from int, c byte) int {
	if i := bytes.IndexByte(b[from:], c); i >= 0 {
		return from + i
	}
	return -1
}

// analysis judges what the parse found as walker.imports, walker.calls and walker.uses do:
// import statements in order, then __import__ calls, then import_module calls, then the uses.
func (p *parser) analysis(targets []Target) *Analysis {
	a := &Analysis{}
	add := func(f found) {
		imp := f.imp
		optional, dead := p.context(f, targets)
		imp.Optional = optional
		if dead {
			a.Skipped = append(a.Skipped, imp)
		} else {
			a.Imports = append(a.Imports, imp)
		}
	}
	for _, f := range p.imports {
		add(f)
	}
	importlib := append([]string{"importlib"}, p.importlib...)
	for _, calls := range [][]found{p.dunders, p.modules} {
		for _, f := range calls {
			if f.viaObj && !slices.Contains(importlib, f.obj) {
				continue
			}
			if f.dynamic {
				a.Dynamic++
				continue
			}
			add(f)
		}
	}
	if !slices.IsSortedFunc(p.ftoks, func(x, y tok) int { return int(x.start - y.start) }) {
		slices.SortFunc(p.ftoks, func(x, y tok) int { return int(x.start - y.start) })
	}
	findUses(a, p.named, p.attributes)
	return a
}

// named is walker.named: the line of the first identifier that is name.
func (p *parser) named(name string) (int, bool) {
	for _, off := range words(p.src, []byte(name)) {
		if t, ok := p.nameAt(off, len(name)); ok {
			return int(t.line) + 1, true
		}
	}
	return 0, false
}

// attributes is walker.attributes: module.<name> where module is an identifier whose parent is
// an attribute, which outside import statements (dotted names there) every name before a dot is.
func (p *parser) attributes(module string, names []string) []attrAt {
	var out []attrAt
	for _, at := range attrSpots(p.src, module, names) {
		t, ok := p.nameAt(at.off, len(module))
		if !ok || p.inImport(int32(at.off)) {
			continue
		}
		out = append(out, attrAt{at.name, int(t.line) + 1})
	}
	return out
}

// nameAt returns the name token at src[off:off+n], in the code or in an f-string's fields.
func (p *parser) nameAt(off, n int) (tok, bool) {
	for _, toks := range [][]tok{p.toks, p.ftoks} {
		// The first token at off; INDENT and DEDENT, which take no room, come before a name.
		i, _ := slices.BinarySearchFunc(toks, int32(off), func(t tok, off int32) int { return int(t.start - off) })
		for ; i < len(toks) && int(toks[i].start) == off; i++ {
			if toks[i].kind == tName && int(toks[i].end) == off+n {
				return toks[i], true
			}
		}
	}
	return tok{}, false
}

// inImport reports whether off is inside an import statement.
func (p *parser) inImport(off int32) bool {
	lo, hi := 0, len(p.importSpans) // find the last statement that starts at or before off
	for lo < hi {
		if m := (lo + hi) / 2; p.importSpans[m][0] <= off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo > 0 && off < p.importSpans[lo-1][1]
}
