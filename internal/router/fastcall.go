package router

// The fast parser's primaries: atoms with their trailers, and the calls among them that the
// walker counts as imports.

// The words that make a call an import: __import__ and import_module.
const (
	wNone = iota
	wDunder
	wModule
)

func (p *parser) word(t tok) int {
	switch t.end - t.start {
	case 10:
		if string(p.src[t.start:t.end]) == "__import__" {
			return wDunder
		}
	case 13:
		if string(p.src[t.start:t.end]) == "import_module" {
			return wModule
		}
	}
	return wNone
}

// primary reads an atom and its trailers (.name, (arguments), [subscript]). It is where calls of
// __import__ and import_module are found, as walker.calls finds them in the tree: the word
// called itself (`__import__(...)`), as the attribute called (`x.__import__(...)`, where for
// import_module x must be a name bound to importlib), or as the object of the attribute called
// (`__import__.f(...)`, which the walker counts too).
func (p *parser) primary() shape {
	atom := p.tok()
	atomWord := wNone
	if atom.kind == tName {
		atomWord = p.word(atom)
	}
	sh := p.atom()
	trailers, lastDot := 0, false
	dotWord, objName := wNone, false // the name after the last dot; whether its object is the atom's name
	for {
		switch p.kind() {
		case oDot:
			p.next()
			name := p.tok()
			p.expect(tName)
			dotWord, objName = p.word(name), trailers == 0 && sh == shName
			sh, lastDot = shTarget, true
		case oLpar:
			if atomWord == wNone && (!lastDot || dotWord == wNone) {
				p.arguments(true)
			} else {
				p.importCall(atom, atomWord, trailers, lastDot, dotWord, objName)
			}
			sh, lastDot = shOther, false
		case oLsqb:
			p.subscript()
			sh, lastDot = shTarget, false
		default:
			return sh
		}
		trailers++
	}
}

// importCall reads the arguments of a call that may be an import, and records each import the
// walker would count there (one per word: `__import__.__import__(x)` counts twice, as the
// walker visits each word).
func (p *parser) importCall(atom tok, atomWord, trailers int, lastDot bool, dotWord int, objName bool) {
	type pending struct {
		list *[]found
		i    int
	}
	var calls [2]pending
	n := 0
	add := func(word int, f found) {
		list := &p.dunders
		if word == wModule {
			list = &p.modules
		}
		f.imp.Line = int(atom.line) + 1
		calls[n] = pending{list, p.found(list, f)}
		n++
	}
	switch {
	case atomWord != wNone && trailers == 0: // __import__(...)
		add(atomWord, found{})
	case atomWord != wNone && trailers == 1 && lastDot: // __import__.f(...): the walker's callee is the attribute
		add(atomWord, found{viaObj: atomWord == wModule, obj: p.text(atom)})
	}
	if lastDot && dotWord == wDunder {
		add(wDunder, found{}) // x.__import__(...)
	}
	if lastDot && dotWord == wModule && objName {
		add(wModule, found{viaObj: true, obj: p.text(atom)}) // importlib.import_module(...)
	}
	lp := p.tok()
	a := p.arguments(true)
	if n > 0 && p.extraIn(lp.start, p.lastEnd) {
		p.fail("a comment in the arguments of an import call") // a named child to tree-sitter
	}
	for _, c := range calls[:n] {
		f := &(*c.list)[c.i]
		f.imp.Module, f.dynamic = p.callModule(a, c.list == &p.modules)
	}
}

// args is what the walker looks at in a call's arguments: how many (tree-sitter's named
// children), a generator for the only argument, and which of the first two are a lone string
// literal (token index, or -1).
type args struct {
	n             int
	generator     bool
	first, second int
}

// arguments reads a call's arguments, or a class's bases (no generator there).
func (p *parser) arguments(call bool) args {
	p.expect(oLpar)
	a := args{first: -1, second: -1}
	for p.kind() != oRpar {
		start := p.i
		switch {
		case p.kind() == oStar || p.kind() == oPow:
			p.next()
			p.expr()
		case p.kind() == tName && p.peek(1) == oAssign:
			p.next()
			p.next()
			p.expr()
		default:
			p.expr()
			if a.n == 0 && (p.kind() == kFor || p.kind() == kAsync) {
				if !call {
					p.fail("a generator as a base class")
				}
				p.comprehension()
				p.expect(oRpar)
				a.generator = true
				return a
			}
		}
		if p.i == start+1 && p.toks[start].kind == tString {
			switch a.n {
			case 0:
				a.first = start
			case 1:
				a.second = start
			}
		}
		a.n++
		if p.kind() != oComma {
			break
		}
		p.next()
	}
	p.expect(oRpar)
	return a
}

// callModule is what walker.calls makes of an import call's arguments: the module, or dynamic.
func (p *parser) callModule(a args, importModule bool) (string, bool) {
	if a.generator || a.n == 0 || a.first < 0 {
		return "", true
	}
	name, ok := literalName(p.text(p.toks[a.first]))
	if !ok {
		return "", true
	}
	if len(name) > 0 && name[0] == '.' && importModule && a.n > 1 && a.second >= 0 {
		if pkg, ok := literalName(p.text(p.toks[a.second])); ok {
			name = resolveRelative(name, pkg)
		}
	}
	if name == "" {
		return "", true
	}
	return name, false
}

func (p *parser) subscript() {
	p.expect(oLsqb)
	for {
		if p.kind() == kLambda || p.kind() == oStar {
			p.fail("lambda or * in a subscript")
		}
		if p.kind() != oColon {
			p.expr()
		}
		if p.kind() == oColon {
			p.next()
			if p.startsExpr() {
				p.expr()
			}
			if p.kind() == oColon {
				p.next()
				if p.startsExpr() {
					p.expr()
				}
			}
		}
		if p.kind() != oComma {
			break
		}
		p.next()
		if p.kind() == oRsqb {
			break
		}
	}
	p.expect(oRsqb)
}
