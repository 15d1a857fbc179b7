package router

// Numbers and operators as Python 3.11 reads them: the scan reads them in rough pieces, and the
// emitter re-reads them whole from their first piece.

// numberEnd returns where the number literal starting at i ends, by Python 3.11's rules, or -1
// if it is malformed.
func numberEnd(src []byte, i int) int {
	if byteAt(src, i) == '0' {
		switch byteAt(src, i+1) | 0x20 {
		case 'x', 'o', 'b':
			base := byteAt(src, i+1) | 0x20
			j := i + 2
			if byteAt(src, j) == '_' {
				j++
			}
			return digitsEnd(src, j, base)
		}
	}
	j := i
	if byteAt(src, j) != '.' {
		if j = digitsEnd(src, i, 'd'); j < 0 {
			return -1
		}
	}
	intOnly := true
	if byteAt(src, j) == '.' {
		if k := digitsEnd(src, j+1, 'd'); k >= 0 {
			j = k
		} else if j == i {
			return -1 // a lone "."
		} else {
			j++ // "1."
		}
		intOnly = false
	}
	if byteAt(src, j)|0x20 == 'e' {
		k := j + 1
		if c := byteAt(src, k); c == '+' || c == '-' {
			k++
		}
		if k = digitsEnd(src, k, 'd'); k < 0 {
			return -1
		}
		j, intOnly = k, false
	}
	if intOnly && src[i] == '0' {
		// "0", "00", "0_0": a decimal integer may start with 0 only if it is all zeros.
		for _, c := range src[i:j] {
			if c != '0' && c != '_' {
				return -1
			}
		}
	}
	if byteAt(src, j)|0x20 == 'j' {
		j++
	}
	return j
}

func byteAt(src []byte, i int) byte {
	if i < len(src) {
		return src[i]
	}
	return 0
}

// digitsEnd reads digit (['_'] digit)* from i in a base ('x', 'o', 'b', or 'd' for decimal);
// -1 if there is no digit at i.
func digitsEnd(src []byte, i int, base byte) int {
	if !isDigit(byteAt(src, i), base) {
		return -1
	}
	for i++; ; {
		switch {
		case isDigit(byteAt(src, i), base):
			i++
		case byteAt(src, i) == '_' && isDigit(byteAt(src, i+1), base):
			i += 2
		default:
			return i
		}
	}
}

func isDigit(c, base byte) bool {
	switch base {
	case 'x':
		return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'f'
	case 'o':
		return c >= '0' && c <= '7'
	case 'b':
		return c == '0' || c == '1'
	}
	return c >= '0' && c <= '9'
}

// operator returns the operator at src[i] (longest match) and its length, or 0 if Python has
// none there ("!", "$", "?", "`", control characters).
func operator(src []byte, i int) (tokKind, int) {
	at := func(j int) byte {
		if i+j < len(src) {
			return src[i+j]
		}
		return 0
	}
	c, d := at(0), at(1)
	switch c {
	case ',':
		return oComma, 1
	case ';':
		return oSemi, 1
	case '~':
		return oTilde, 1
	case '.':
		if d == '.' && at(2) == '.' {
			return oEllipsis, 3
		}
		return oDot, 1
	case ':':
		if d == '=' {
			return oWalrus, 2
		}
		return oColon, 1
	case '=':
		if d == '=' {
			return oEq, 2
		}
		return oAssign, 1
	case '!':
		if d == '=' {
			return oNe, 2
		}
		return 0, 0
	case '-':
		switch d {
		case '>':
			return oArrow, 2
		case '=':
			return oAugment, 2
		}
		return oMinus, 1
	case '+', '%', '&', '|', '^', '@':
		if d == '=' {
			return oAugment, 2
		}
		switch c {
		case '+':
			return oPlus, 1
		case '%':
			return oPercent, 1
		case '&':
			return oAmp, 1
		case '|':
			return oPipe, 1
		case '^':
			return oCaret, 1
		}
		return oAt, 1
	case '*', '/', '<', '>':
		if d == c {
			if at(2) == '=' {
				return oAugment, 3
			}
			switch c {
			case '*':
				return oPow, 2
			case '/':
				return oFloorDiv, 2
			case '<':
				return oShiftL, 2
			}
			return oShiftR, 2
		}
		switch {
		case d == '=' && (c == '*' || c == '/'):
			return oAugment, 2
		case d == '=' && c == '<':
			return oLe, 2
		case d == '=':
			return oGe, 2
		case c == '<' && d == '>':
			return 0, 0 // Python 2's <>: tree-sitter reads it, CPython does not
		case c == '*':
			return oStar, 1
		case c == '/':
			return oSlash, 1
		case c == '<':
			return oLt, 1
		}
		return oGt, 1
	case '(':
		return oLpar, 1
	case ')':
		return oRpar, 1
	case '[':
		return oLsqb, 1
	case ']':
		return oRsqb, 1
	case '{':
		return oLbrace, 1
	case '}':
		return oRbrace, 1
	}
	return 0, 0
}
