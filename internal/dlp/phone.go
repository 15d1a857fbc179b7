package dlp

import (
	"strconv"
	"strings"

	"github.com/nyaruka/phonenumbers"
)

// Phone numbers: a cluster is a candidate if it starts with '+' (international form, 8 to 15
// digits), or has at least two groups (national form, 7 to 15 digits), or is one bare run of 7 to
// 12 digits with a context word ("phone", "tel", "mobile", ...) in the 32 bytes before. A
// candidate must parse with phonenumbers for Config.PhoneRegion and be a valid number
// (IsValidNumber: the right length and an assigned range for its country), and its digit groups
// must agree with how the number is formatted (national or international form; a candidate
// group may join neighbouring formatted groups): "415-555-2671" and "+44 20 7946 0958" match,
// "2024-01-15 10" (a date and an hour, which parse as a valid US number) does not. This is
// libphonenumber's "strict grouping" leniency, which its Go port does not implement.
// Candidates that look like dates (2024-01-15), IPv4 addresses, or are glued to a time (10:30) are skipped
// before the comparatively slow parse.

var phoneContext = []string{"phone", "tel", "mobile", "cell", "fax", "sms", "whatsapp", "call"}

func (s *Scanner) phone(text []byte, c *cluster, b *budget) (match, bool) {
	g := c.groups
	switch {
	case c.plus:
		if c.ndigits < 8 || c.ndigits > 15 {
			return match{}, false
		}
	case len(g) >= 2:
		if c.ndigits > 15 {
			return match{}, false
		}
	default:
		if c.ndigits > 12 || !hasContext(text, c.start, phoneContext) {
			return match{}, false
		}
	}
	if !c.plus && (c.ndigits >= 64 || s.phoneLens&(1<<c.ndigits) == 0) {
		return match{}, false
	}
	// A time or ratio: "10:30", "2024-01-15 10:30".
	if (c.end+1 < len(text) && text[c.end] == ':' && isDigit(text[c.end+1])) ||
		(c.start >= 2 && text[c.start-1] == ':' && isDigit(text[c.start-2])) {
		return match{}, false
	}
	// A date: 2024-01-15, 2024.01.15.
	if !c.plus && len(g) >= 3 && g[0][1]-g[0][0] == 4 && g[1][1]-g[1][0] == 2 && g[2][1]-g[2][0] == 2 {
		return match{}, false
	}
	// An IPv4 address: 10.0.12.7.
	if !c.plus && len(g) == 4 {
		ip := true
		for k, r := range g {
			ip = ip && r[1]-r[0] <= 3 && (k == 3 || string(c.sep(text, k)) == ".")
		}
		if ip {
			return match{}, false
		}
	}
	if b.parses--; b.parses < 0 {
		b.stop("it has more phone number candidates than the DLP checks in one text")
		return match{}, false
	}
	cand := string(text[c.start:c.end])
	num, err := phonenumbers.Parse(cand, s.cfg.PhoneRegion)
	if err != nil || !phonenumbers.IsValidNumber(num) {
		return match{}, false
	}
	if len(g) >= 2 {
		var cg []string
		for _, r := range g {
			cg = append(cg, string(text[r[0]:r[1]]))
		}
		if !groupsCompatible(cg, digitGroups(phonenumbers.Format(num, phonenumbers.NATIONAL))) &&
			!groupsCompatible(cg, digitGroups(phonenumbers.Format(num, phonenumbers.INTERNATIONAL))) {
			return match{}, false
		}
	}
	region := phonenumbers.GetRegionCodeForNumber(num)
	desc := "a phone number"
	if region != "" {
		desc += " (" + region + ")"
	}
	return match{detector: DetectorPhone, desc: desc, start: c.start, end: c.end,
		action: s.cfg.action(DetectorPhone, "")}, true
}

func digitGroups(s string) []string {
	var out []string
	start := -1
	for i := 0; i <= len(s); i++ {
		if i < len(s) && isDigit(s[i]) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			out = append(out, s[start:i])
			start = -1
		}
	}
	return out
}

// groupsCompatible reports whether each candidate group is a concatenation of consecutive
// formatted groups, using them all.
func groupsCompatible(cand, formatted []string) bool {
	k := 0
	for _, g := range cand {
		acc := ""
		for len(acc) < len(g) && k < len(formatted) {
			acc += formatted[k]
			k++
		}
		if acc != g {
			return false
		}
	}
	return k == len(formatted)
}

// nationalLengths returns, as a bit set, the digit counts a number of region can have when
// written without '+': its possible national lengths, with the national prefix (0 in GB, 1 in
// the US), or with the country code. US: 10 and 11. Candidates of other lengths are not parsed.
func nationalLengths(region string) uint64 {
	cc := phonenumbers.GetCountryCodeForRegion(region)
	if cc == 0 {
		return 0
	}
	ccs := strconv.Itoa(cc)
	ndd := phonenumbers.GetNddPrefixForRegion(region, true)
	var set uint64
	for l := 2; l <= 17; l++ {
		num, err := phonenumbers.Parse("+"+ccs+strings.Repeat("2", l), region)
		if err != nil {
			continue
		}
		if phonenumbers.IsPossibleNumberWithReason(num) != phonenumbers.IS_POSSIBLE {
			continue
		}
		for _, n := range []int{l, l + len(ndd), l + len(ccs)} {
			if n < 64 {
				set |= 1 << n
			}
		}
	}
	return set
}
