package dlp

import (
	"bytes"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// E-mail addresses: local@domain where the local part is the common dot-atom subset of RFC 5322
// (letters, digits and ._%+-, at most 64, no leading, trailing or double dot) and the domain has
// at least two labels and ends in a public suffix that ICANN manages (the public suffix list
// compiled into golang.org/x/net/publicsuffix). The suffix check is what keeps "icon@2x.png",
// "pkg@1.2.3" and "user@localhost" out. Quoted local parts and IDN domains are not recognised.

func isLocalChar(c byte) bool {
	return isWord(c) || c == '.' || c == '%' || c == '+' || c == '-'
}

func isDomainChar(c byte) bool {
	return byteClass[c]&(clsDigit|clsUpper|clsLower) != 0 || c == '-' || c == '.'
}

func (s *Scanner) scanEmails(text []byte, out []match) []match {
	for at := 0; ; at++ {
		k := bytes.IndexByte(text[at:], '@')
		if k < 0 {
			return out
		}
		at += k
		if m, ok := s.emailAt(text, at); ok {
			out = append(out, m)
			at = m.end - 1
			if len(out) > maxFindingsPerText {
				return out // scanText cuts the list and says so
			}
		}
	}
}

func (s *Scanner) emailAt(text []byte, at int) (match, bool) {
	ls := at
	for ls > 0 && at-ls <= 64 && isLocalChar(text[ls-1]) {
		ls--
	}
	local := text[ls:at]
	if len(local) == 0 || len(local) > 64 || local[0] == '.' || local[len(local)-1] == '.' ||
		bytes.Contains(local, []byte("..")) {
		return match{}, false
	}
	de := at + 1
	for de < len(text) && de-at <= 253 && isDomainChar(text[de]) {
		de++
	}
	for de > at+1 && (text[de-1] == '.' || text[de-1] == '-') { // sentence end
		de--
	}
	domain := strings.ToLower(string(text[at+1 : de]))
	labels := strings.Split(domain, ".")
	if len(labels) < 2 || len(domain) > 253 {
		return match{}, false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return match{}, false
		}
	}
	tld := labels[len(labels)-1]
	for i := 0; i < len(tld); i++ {
		if byteClass[tld[i]]&clsLower == 0 {
			return match{}, false
		}
	}
	suffix, icann := publicsuffix.PublicSuffix(domain)
	if !icann || suffix == domain {
		return match{}, false
	}
	return match{detector: DetectorEmail, desc: "an e-mail address", start: ls, end: de,
		action: s.cfg.action(DetectorEmail, "")}, true
}
