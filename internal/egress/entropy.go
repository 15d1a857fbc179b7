package egress

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// Entropy: a token is random when it is long, its bytes are spread (Shannon entropy per byte) and
// its letters are not pronounceable (few vowels). The entropy of a string of n bytes is at most
// log2(n), and hex at most 4 bits, so the length and the threshold together decide what can be
// caught: random base64 of 32 bytes averages 4.56 bits (1st percentile 4.23), base32 4.2, hex 3.6,
// a UUID 3.4, a SHA-256 in hex 3.7. The vowel test keeps out identifiers and slugs that are
// spread but made of words ("internal-my-service-lb-1234567890", "ThisIsAVeryLongCamelCaseName"):
// among the letters of random text ~19% are vowels, of English ~38%.

// shannon is the entropy of s in bits per byte.
func shannon(s string) float64 {
	if len(s) == 0 {
		return 0
	}
	var counts [256]uint16
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	n := float64(len(s))
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

// vowelShare is the share of vowels among the ASCII letters of s (0 without letters).
func vowelShare(s string) float64 {
	letters, vowels := 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if c >= 'a' && c <= 'z' {
			letters++
			switch c {
			case 'a', 'e', 'i', 'o', 'u':
				vowels++
			}
		}
	}
	if letters == 0 {
		return 0
	}
	return float64(vowels) / float64(letters)
}

const maxVowelShare = 0.3

// randomToken reports whether s reads as random under a length and entropy threshold.
func randomToken(s string, minLen int, bits float64) bool {
	return len(s) >= minLen && vowelShare(s) < maxVowelShare && shannon(s) > bits // the cheap test first
}

// randomHex reports whether s is a run of at least 32 hex digits with both letters and digits
// (16 bytes or more of data, which entropy cannot tell from a hash).
func randomHex(s string) bool {
	if len(s) < 32 {
		return false
	}
	letters, digits := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			digits = true
		case c|0x20 >= 'a' && c|0x20 <= 'f':
			letters = true
		default:
			return false
		}
	}
	return letters && digits
}

// isTokenByte is what tokens are made of: base64 (standard and URL-safe) and its padding, and
// '-', '_', '/' which also join the words of slugs, names and paths. Everything else ('.', ',',
// ';', spaces, quotes...) separates.
func isTokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=' || c == '-' || c == '_'
}

// entropyFinding is one random token found in a request.
type entropyFinding struct {
	where string // "the URL path", "the query parameter q", "the header X-Data"
	token string
	bits  float64
}

// randomTokens returns the random tokens of s (at most max of them). A run of token bytes
// without '-', '_' or '/' is judged whole. One with them is judged in parts: each piece between
// them, and each stretch of consecutive pieces that have a capital letter (short pieces of four
// bytes or fewer bridge a stretch), joiners included. Pieces without a capital are what slugs,
// versions, paths and file names are made of ("3-cp312-cp312-manylinux_2_17_x86_64",
// "packages/4c/2b/<sha256>/numpy-2.1.3.whl"), and are judged alone; base64 has a capital in
// nearly every piece longer than a few characters, wherever '/', '-' or '_' cut it, so a base64
// token is judged whole even inside a path ("upload/wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY").
func randomTokens(s string, minLen int, bits float64, max int) []string {
	var out []string
	add := func(tok string) bool {
		if len(out) < max && randomToken(tok, minLen, bits) {
			out = append(out, tok)
			return true
		}
		return false
	}
	for i := 0; i < len(s) && len(out) < max; {
		if !isTokenByte(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isTokenByte(s[j]) {
			j++
		}
		run := s[i:j]
		i = j
		if len(run) < minLen {
			continue
		}
		if !strings.ContainsAny(run, "-_/") {
			add(run)
			continue
		}
		// Walk the pieces; a stretch runs from the first piece with a capital to the last
		// piece with one before a long plain piece.
		stretchLo, stretchHi, capital := -1, -1, false
		flush := func() {
			if capital && stretchHi-stretchLo >= minLen {
				add(run[stretchLo:stretchHi])
			}
			stretchLo, stretchHi, capital = -1, -1, false
		}
		for a := 0; a < len(run); {
			if isJoiner(rune(run[a])) {
				a++
				continue
			}
			b := a
			for b < len(run) && !isJoiner(rune(run[b])) {
				b++
			}
			piece := run[a:b]
			hasCap := strings.IndexFunc(piece, func(r rune) bool { return r >= 'A' && r <= 'Z' }) >= 0
			if hasCap || len(piece) <= 4 && stretchLo >= 0 {
				if stretchLo < 0 {
					stretchLo = a
				}
				if hasCap {
					stretchHi, capital = b, true
				}
			} else {
				flush()
				add(piece) // a plain piece is judged alone
			}
			a = b
		}
		flush()
	}
	return out
}

func isJoiner(r rune) bool { return r == '-' || r == '_' || r == '/' }

// scanEntropy finds random tokens in the URL path (decoded), the query parameters (names and
// values, decoded) and the header values of r.
func scanEntropy(r *http.Request, e *Entropy) []entropyFinding {
	const maxFindings = 32
	var out []entropyFinding
	add := func(where, s string) {
		if len(s) < e.MinLength || len(out) >= maxFindings {
			return
		}
		for _, tok := range randomTokens(s, e.MinLength, e.Bits, maxFindings-len(out)) {
			out = append(out, entropyFinding{where: where, token: tok, bits: shannon(tok)})
		}
	}
	if r.URL != nil {
		add("the URL path", r.URL.Path)
		if q := r.URL.RawQuery; len(q) >= e.MinLength {
			for _, kv := range strings.Split(q, "&") {
				k, v, _ := strings.Cut(kv, "=")
				k, _ = url.QueryUnescape(k)
				if dv, err := url.QueryUnescape(v); err == nil {
					v = dv
				}
				where := "the query parameter " + shortQuery(k)
				add(where, k)
				add(where, v)
			}
		}
	}
	names := make([]string, 0, len(r.Header))
	for name := range r.Header {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		add("a header name", name)
		if containsFold(e.IgnoreHeaders, name) {
			continue
		}
		for _, v := range r.Header[name] {
			add("the header "+name, v)
		}
	}
	return out
}

// shortQuery is a query parameter's name as a reason may show it: short, and not itself random.
func shortQuery(k string) string {
	if len(k) > 32 || randomToken(k, 16, 3.5) {
		return "[a long name]"
	}
	return k
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

func (f entropyFinding) reason() string {
	return fmt.Sprintf("a high-entropy token (%d characters, %.1f bits per character) in %s", len(f.token), f.bits, f.where)
}
