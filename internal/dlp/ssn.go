package dlp

// US social security numbers: AAA-GG-SSSS with '-' or ' ' used consistently, as a cluster of
// its own (not part of a longer run of groups), or nine bare digits with a context word ("ssn",
// "social security") in the 32 bytes before: nine-digit numbers are too common (ids, amounts in
// cents, ZIP+4 without the dash) to flag bare. The number must be one the SSA issues: area not
// 000, 666 or 900-999, group not 00, serial not 0000; and not one of the two numbers famous for
// being published (078-05-1120 from a wallet insert, 219-09-9999 from an advert).

var ssnContext = []string{"ssn", "social security", "social_security", "social-security", "socialsecurity"}

func (s *Scanner) ssn(text []byte, c *cluster) (match, bool) {
	if c.plus || c.start != c.groups[0][0] || c.ndigits != 9 {
		return match{}, false
	}
	g := c.groups
	switch len(g) {
	case 1:
		if !hasContext(text, c.start, ssnContext) {
			return match{}, false
		}
	case 3:
		sep := c.sep(text, 0)
		if len(sep) != 1 || (sep[0] != '-' && sep[0] != ' ') || string(c.sep(text, 1)) != string(sep) ||
			g[0][1]-g[0][0] != 3 || g[1][1]-g[1][0] != 2 {
			return match{}, false
		}
	default:
		return match{}, false
	}
	var d []byte
	for _, r := range g {
		d = append(d, text[r[0]:r[1]]...)
	}
	if !validSSN(string(d)) {
		return match{}, false
	}
	return match{detector: DetectorUSSSN, desc: "a US social security number", start: c.start, end: c.end,
		action: s.cfg.action(DetectorUSSSN, "")}, true
}

func validSSN(d string) bool {
	area, group, serial := d[:3], d[3:5], d[5:]
	switch {
	case area == "000", area == "666", area[0] == '9', group == "00", serial == "0000",
		d == "078051120", d == "219099999":
		return false
	}
	return true
}
