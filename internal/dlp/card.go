package dlp

// Payment cards: 13 to 19 digits, written either as one run of digits or in groups separated by
// one space or one '-' used consistently, laid out as card numbers are printed (4-4-4-4, 4-4-4-4-3,
// 4-6-5 for Amex, 4-6-4 for Diners; any run of 4-digit groups ending in a group of 1 to 4). The
// number must pass the Luhn check and fall in the IIN range of a major brand with a length that
// brand issues. A run of digits longer than 19 never matches in part, and neither does a run
// glued to a letter or written as the fraction or integer part of a decimal number.

type cardBrand struct {
	id, name string
	lengths  []int
	// prefixes are [lo, hi] ranges over the first len(lo) digits.
	prefixes [][2]string
}

// cardBrands lists IIN ranges from the brands' published tables (and Wikipedia's summary of
// them). Order matters: the first brand whose range and length fit wins.
var cardBrands = []cardBrand{
	{"amex", "American Express", []int{15}, [][2]string{{"34", "34"}, {"37", "37"}}},
	{"diners", "Diners Club", []int{14, 15, 16, 17, 18, 19}, [][2]string{{"300", "305"}, {"3095", "3095"}, {"36", "36"}, {"38", "39"}}},
	{"jcb", "JCB", []int{16, 17, 18, 19}, [][2]string{{"3528", "3589"}}},
	{"visa", "Visa", []int{13, 16, 19}, [][2]string{{"4", "4"}}},
	{"mastercard", "Mastercard", []int{16}, [][2]string{{"51", "55"}, {"2221", "2720"}}},
	{"discover", "Discover", []int{16, 17, 18, 19}, [][2]string{{"6011", "6011"}, {"644", "649"}, {"65", "65"}, {"622126", "622925"}}},
	{"unionpay", "UnionPay", []int{16, 17, 18, 19}, [][2]string{{"62", "62"}}},
	{"maestro", "Maestro", []int{13, 14, 15, 16, 17, 18, 19}, [][2]string{{"5018", "5018"}, {"5020", "5020"}, {"5038", "5038"}, {"5893", "5893"}, {"6304", "6304"}, {"6759", "6759"}, {"6761", "6763"}}},
}

func cardBrandOf(d []byte) *cardBrand {
	for i := range cardBrands {
		b := &cardBrands[i]
		okLen := false
		for _, l := range b.lengths {
			okLen = okLen || l == len(d)
		}
		if !okLen {
			continue
		}
		for _, p := range b.prefixes {
			n := len(p[0])
			if string(d[:n]) >= p[0] && string(d[:n]) <= p[1] {
				return b
			}
		}
	}
	return nil
}

func luhn(d []byte) bool {
	sum, dbl := 0, false
	for i := len(d) - 1; i >= 0; i-- {
		v := int(d[i] - '0')
		if dbl {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
		dbl = !dbl
	}
	return sum%10 == 0
}

// cardLayout reports whether group lengths are a printed card layout.
func cardLayout(lens []int) bool {
	switch len(lens) {
	case 3:
		if lens[0] == 4 && lens[1] == 6 && (lens[2] == 4 || lens[2] == 5) {
			return true
		}
	case 4, 5:
	default:
		return false
	}
	for _, l := range lens[:len(lens)-1] {
		if l != 4 {
			return false
		}
	}
	last := lens[len(lens)-1]
	return last >= 1 && last <= 4
}

// cards finds card numbers among consecutive groups of c, longest first from each group.
func (s *Scanner) cards(text []byte, c *cluster, out []match) []match {
	if c.ndigits < 13 {
		return out
	}
	g := c.groups
	for gi := 0; gi < len(g); gi++ {
		for gj := min(len(g)-1, gi+4); gj >= gi; gj-- {
			if m, ok := cardAt(text, c, gi, gj); ok {
				m.action = s.cfg.action(DetectorPaymentCard, m.rule)
				out = append(out, m)
				gi = gj
				break
			}
		}
	}
	return out
}

func cardAt(text []byte, c *cluster, gi, gj int) (match, bool) {
	g := c.groups
	var lens [5]int
	n := 0
	for k := gi; k <= gj; k++ {
		lens[k-gi] = g[k][1] - g[k][0]
		n += lens[k-gi]
	}
	if n < 13 || n > 19 {
		return match{}, false
	}
	if gi == gj {
		// One run: not the integer or fraction part of a decimal number.
		if (gi > 0 && string(c.sep(text, gi-1)) == ".") || (gj < len(g)-1 && string(c.sep(text, gj)) == ".") {
			return match{}, false
		}
	} else {
		sep := c.sep(text, gi)
		if len(sep) != 1 || (sep[0] != ' ' && sep[0] != '-') {
			return match{}, false
		}
		for k := gi + 1; k < gj; k++ {
			if string(c.sep(text, k)) != string(sep) {
				return match{}, false
			}
		}
		if !cardLayout(lens[:gj-gi+1]) {
			return match{}, false
		}
	}
	var digits [19]byte
	n = 0
	for k := gi; k <= gj; k++ {
		n += copy(digits[n:], text[g[k][0]:g[k][1]])
	}
	d := digits[:n]
	if !luhn(d) {
		return match{}, false
	}
	b := cardBrandOf(d)
	if b == nil {
		return match{}, false
	}
	return match{detector: DetectorPaymentCard, rule: b.id, desc: "a payment card number (" + b.name + ")",
		start: g[gi][0], end: g[gj][1]}, true
}
