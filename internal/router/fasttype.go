package router

// typeExpr reads an annotation. tree-sitter-python reads annotations by a grammar of their own
// (type), in which a name followed by [ starts a generic type that may be followed only by |, .
// or the annotation's end: `x: a[b] + c` and `x: a[::2]` are errors to it. Annotations whose
// generics keep to that grammar (list[int] | None, Callable[[int], str], np.ndarray[int]) pass.
func (p *parser) typeExpr() {
	from := p.i
	p.expr()
	p.safeType(from, p.i)
}

// safeType checks the annotation in tokens [from, to): each operand of its top-level |.
func (p *parser) safeType(from, to int) {
	depth, start := 0, from
	for k := from; k <= to; k++ {
		if k == to || depth == 0 && p.toks[k].kind == oPipe {
			p.safeOperand(start, k)
			start = k + 1
			continue
		}
		switch p.toks[k].kind {
		case oLpar, oLsqb, oLbrace:
			depth++
		case oRpar, oRsqb, oRbrace:
			depth--
		}
	}
}

// safeOperand checks a name[...] at the start of an operand: name or dotted name, [types], then
// only .name to the end.
func (p *parser) safeOperand(from, to int) {
	k := from
	if k >= to || p.toks[k].kind != tName {
		return
	}
	for k+2 < to && p.toks[k+1].kind == oDot && p.toks[k+2].kind == tName {
		k += 2
	}
	if k+1 >= to || p.toks[k+1].kind != oLsqb {
		return
	}
	end := p.closing(k + 1)
	if end < 0 || end >= to {
		p.fail("an annotation")
	}
	for _, e := range p.split(k+2, end) {
		for j, depth := e[0], 0; j < e[1]; j++ {
			switch p.toks[j].kind {
			case oLpar, oLsqb, oLbrace:
				depth++
			case oRpar, oRsqb, oRbrace:
				depth--
			case oColon:
				if depth == 0 {
					p.fail("a slice in an annotation's generic")
				}
			}
		}
		p.safeType(e[0], e[1])
	}
	k = end + 1
	for k+1 < to && p.toks[k].kind == oDot && p.toks[k+1].kind == tName {
		k += 2
	}
	if k != to {
		p.fail("an annotation that goes on after a generic")
	}
}
