package router

// The fast path's import statements: what walker.importStatement and walker.fromStatement read
// off the tree, read off the tokens.

func (p *parser) importStatement() {
	st := p.tok()
	p.next()
	for {
		from, to := p.dottedName()
		module := compact(p.src[from:to])
		if p.kind() == kAs {
			p.next()
			alias := p.tok()
			p.expect(tName)
			if module == "importlib" {
				p.importlib = append(p.importlib, p.text(alias))
			}
		}
		p.found(&p.imports, found{imp: Import{Module: module, Line: int(st.line) + 1}})
		if p.kind() != oComma {
			break
		}
		p.next()
	}
	p.importSpans = append(p.importSpans, [2]int32{st.start, p.lastEnd})
}

// dottedName reads a.b.c and returns its bytes.
func (p *parser) dottedName() (from, to int32) {
	from = p.tok().start
	for {
		t := p.tok()
		p.expect(tName)
		if p.text(t) == "__future__" {
			p.fail("__future__ outside a future statement") // a keyword to tree-sitter
		}
		if p.kind() != oDot {
			return from, t.end
		}
		p.next()
	}
}

func (p *parser) fromStatement() {
	st := p.tok()
	p.next()
	future := p.kind() == tName && p.text(p.tok()) == "__future__" && p.peek(1) == kImport
	from := p.tok().start
	var to int32
	dots := 0
	for p.kind() == oDot || p.kind() == oEllipsis {
		p.next()
		dots++
	}
	switch {
	case future:
		to = p.tok().end
		p.next()
	case p.kind() == tName:
		_, to = p.dottedName()
	case dots > 0:
		to = p.lastEnd
	default:
		p.fail("from without a module")
	}
	imp := Import{Module: compact(p.src[from:to]), Line: int(st.line) + 1}
	p.expect(kImport)
	switch p.kind() {
	case oStar:
		if future {
			p.fail("from __future__ import *")
		}
		p.next()
	case oLpar:
		p.next()
		p.importNames(&imp, true)
		p.expect(oRpar)
	default:
		p.importNames(&imp, false)
	}
	if future {
		imp.Names = nil // tree-sitter's future_import_statement: the walker takes no names
	}
	p.found(&p.imports, found{imp: imp})
	p.importSpans = append(p.importSpans, [2]int32{st.start, p.lastEnd})
}

// importNames reads `a as b, c`, up to a closing parenthesis if inParens.
func (p *parser) importNames(imp *Import, inParens bool) {
	for {
		t := p.tok()
		p.expect(tName)
		if p.text(t) == "__future__" {
			p.fail("__future__ as a name")
		}
		imp.Names = append(imp.Names, p.text(t))
		if p.kind() == kAs {
			p.next()
			p.expect(tName)
		}
		if p.kind() != oComma {
			return
		}
		p.next()
		if !inParens {
			continue
		}
		if p.kind() == oRpar {
			return
		}
	}
}

// found records something found, with a copy of what encloses it.
func (p *parser) found(list *[]found, f found) int {
	f.frameAt, f.nFram = int32(len(p.arena)), int32(len(p.frames))
	p.arena = append(p.arena, p.frames...)
	*list = append(*list, f)
	return len(*list) - 1
}
