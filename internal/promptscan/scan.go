package promptscan

import (
	"bytes"
	"fmt"
	"mime"
	"sort"
	"strings"
	"unicode/utf8"
)

// Finding kinds.
const (
	KindHiddenText = "hidden-text"
	KindInvisible  = "invisible-unicode"
	KindPhrase     = "injection-phrase"
)

// Rules of hidden text and invisible Unicode findings (a phrase finding's Rule is the phrase's
// id in the table).
const (
	RuleHTMLComment   = "html-comment"
	RuleDisplayNone   = "display-none"
	RuleVisibility    = "visibility-hidden"
	RuleZeroFont      = "font-size-0"
	RuleZeroOpacity   = "opacity-0"
	RuleHiddenAttr    = "hidden-attribute"
	RuleTagCharacters = "tag-characters"
	RuleZeroWidth     = "zero-width"
	RuleBidiOverride  = "bidi-override"
)

// Finding is one thing found. It holds no text of the scanned content: only what kind of thing
// it is, which rule found it and how many times, so a finding can be logged and shown anywhere.
type Finding struct {
	Kind string
	// Rule says which: a hiding method (RuleHTMLComment, ...), an invisible character class
	// (RuleTagCharacters, ...) or a phrase id ("ignore-previous").
	Rule string
	// Phrase, for hidden text, is the phrase id found in it, or "addressed-to-model" when the
	// hidden text names a model with an imperative and no known phrasing.
	Phrase string
	// Count is how many times: characters for invisible Unicode, occurrences otherwise.
	Count int
}

func (f Finding) String() string {
	s := f.Kind + ":" + f.Rule
	if f.Phrase != "" {
		s += "(" + f.Phrase + ")"
	}
	if f.Count > 1 {
		s += fmt.Sprintf("x%d", f.Count)
	}
	return s
}

// Result is what a scan found.
type Result struct {
	Findings []Finding
	// Scanned is how many bytes were scanned.
	Scanned int
}

// Flagged reports whether anything was found.
func (r Result) Flagged() bool { return len(r.Findings) > 0 }

// Rules lists the findings as "kind:rule" (with the phrase for hidden text), sorted, once each.
func (r Result) Rules() []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range r.Findings {
		s := f.Kind + ":" + f.Rule
		if f.Phrase != "" {
			s += ":" + f.Phrase
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// Summary is one line of plain ASCII for a person or an agent, e.g. "hidden text (html-comment:
// ignore-previous); injection phrasing (ignore-previous); invisible Unicode (tag-characters x42)".
// It quotes nothing of the content.
func (r Result) Summary() string {
	var hidden, phrases, invisible []string
	for _, f := range r.Findings {
		switch f.Kind {
		case KindHiddenText:
			hidden = append(hidden, f.Rule+": "+f.Phrase)
		case KindPhrase:
			phrases = append(phrases, f.Rule)
		case KindInvisible:
			invisible = append(invisible, fmt.Sprintf("%s x%d", f.Rule, f.Count))
		}
	}
	var parts []string
	if len(hidden) > 0 {
		parts = append(parts, "hidden text ("+strings.Join(uniq(hidden), ", ")+")")
	}
	if len(phrases) > 0 {
		parts = append(parts, "injection phrasing ("+strings.Join(uniq(phrases), ", ")+")")
	}
	if len(invisible) > 0 {
		parts = append(parts, "invisible Unicode ("+strings.Join(uniq(invisible), ", ")+")")
	}
	return strings.Join(parts, "; ")
}

func uniq(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// IsText reports whether a Content-Type is text a model may read, and so worth scanning:
// text/* (except text/event-stream, which streams and is not buffered), JSON, XML, XHTML,
// JavaScript and NDJSON. An empty Content-Type is not.
func IsText(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(strings.Split(contentType, ";")[0]))
	}
	switch {
	case mt == "text/event-stream":
		return false
	case strings.HasPrefix(mt, "text/"):
		return true
	case mt == "application/json", mt == "application/xml", mt == "application/xhtml+xml",
		mt == "application/javascript", mt == "application/x-ndjson", mt == "application/ld+json",
		strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"):
		return true
	}
	return false
}

// Scan scans a response body of the given Content-Type, already decoded from its
// Content-Encoding, if the type is text (IsText); other bodies are not scanned (Scanned is 0).
// Markup (comments, hidden elements) is looked for in every text type: JSON and Markdown carry
// HTML too.
func Scan(contentType string, body []byte) Result {
	if !IsText(contentType) {
		return Result{}
	}
	return ScanText(body)
}

// ScanText scans text of any kind, e.g. an MCP tool's result: invisible characters, phrasings,
// and HTML comments and hidden elements (a tool that returns a page returns its markup).
func ScanText(b []byte) Result {
	const markup = true
	res := Result{Scanned: len(b)}
	inv, smuggled := invisible(b)
	res.Findings = append(res.Findings, inv...)
	norm := normalize(b, markup)
	for _, id := range matchPhrases(norm, false) {
		res.Findings = append(res.Findings, Finding{Kind: KindPhrase, Rule: id, Count: 1})
	}
	if len(smuggled) > 0 {
		for _, id := range matchPhrases(normalize(smuggled, false), true) {
			res.Findings = append(res.Findings, Finding{Kind: KindPhrase, Rule: id, Count: 1})
		}
	}
	if markup && hasByte(b, '<') {
		res.Findings = append(res.Findings, hiddenText(b)...)
	}
	res.Findings = merge(res.Findings)
	return res
}

func hasByte(b []byte, c byte) bool { return bytes.IndexByte(b, c) >= 0 }

var commentOpen, commentClose = []byte("<!--"), []byte("-->")

// merge folds findings with the same kind, rule and phrase into one with the summed count.
func merge(fs []Finding) []Finding {
	if len(fs) < 2 {
		return fs
	}
	type key struct{ k, r, p string }
	idx := map[key]int{}
	out := fs[:0:0]
	for _, f := range fs {
		k := key{f.Kind, f.Rule, f.Phrase}
		if i, ok := idx[k]; ok {
			out[i].Count += f.Count
			continue
		}
		idx[k] = len(out)
		out = append(out, f)
	}
	return out
}

// Invisible characters.
const (
	zwsp    = 0x200B
	zwnj    = 0x200C
	zwj     = 0x200D
	wj      = 0x2060
	bom     = 0xFEFF
	mvs     = 0x180E
	lro     = 0x202D
	rlo     = 0x202E
	tagLo   = 0xE0000
	tagHi   = 0xE007F
	tagEnd  = 0xE007F
	flagTag = 0x1F3F4 // WAVING BLACK FLAG: subdivision flags follow it with tag characters
)

func isZeroWidth(r rune) bool {
	return r == zwsp || r == zwnj || r == zwj || r == wj || r == bom || r == mvs
}

// isInvisible reports the characters normalize removes.
func isInvisible(r rune) bool {
	return isZeroWidth(r) || r >= tagLo && r <= tagHi || r >= 0x202A && r <= 0x202E ||
		r >= 0x2066 && r <= 0x2069 || r == 0x00AD || r == 0x2061 || r == 0x2062 || r == 0x2063 || r == 0x2064
}

// invisible counts the invisible characters that hide text, and returns the ASCII that tag
// characters spell.
func invisible(b []byte) ([]Finding, []byte) {
	var tags, zw, bidi, run, maxRun int
	var smuggled []byte
	var prev rune
	inFlag := false
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			// Skip the ASCII run at once.
			j := i + 1
			for j < len(b) && b[j] < utf8.RuneSelf {
				j++
			}
			i = j
			prev, run, inFlag = rune(b[j-1]), 0, false
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == flagTag:
			inFlag = true
		case r >= tagLo && r <= tagHi:
			if !inFlag {
				tags++
				if r >= 0xE0020 && r < 0xE007F {
					smuggled = append(smuggled, byte(r-0xE0000))
				} else {
					smuggled = append(smuggled, ' ')
				}
			}
			if r == tagEnd {
				inFlag = false
			}
		case isZeroWidth(r):
			inFlag = false
			if r == bom && i == 0 {
				break
			}
			if r == zwj || r == zwnj {
				// Joiners between two non-ASCII characters: emoji sequences, Persian, Indic.
				next, _ := utf8.DecodeRune(b[i+n:])
				if prev >= utf8.RuneSelf && next >= utf8.RuneSelf && !isZeroWidth(prev) && !isZeroWidth(next) {
					break
				}
			}
			zw++
			run++
			maxRun = max(maxRun, run)
			i += n
			prev = r
			continue
		case r == lro || r == rlo:
			inFlag = false
			bidi++
		default:
			inFlag = false
		}
		run = 0
		prev = r
		i += n
	}
	var out []Finding
	if tags > 0 {
		out = append(out, Finding{Kind: KindInvisible, Rule: RuleTagCharacters, Count: tags})
	}
	if maxRun >= 2 || zw >= 4 {
		out = append(out, Finding{Kind: KindInvisible, Rule: RuleZeroWidth, Count: zw})
	}
	if bidi > 0 {
		out = append(out, Finding{Kind: KindInvisible, Rule: RuleBidiOverride, Count: bidi})
	}
	return out, smuggled
}

// normalize makes the text phrasings are matched on: ASCII lower case, invisible characters
// dropped, tags (markup) and whitespace runs made one space, common entities decoded. Comment
// markers are dropped and their content kept.
func normalize(b []byte, markup bool) []byte {
	out := make([]byte, 0, len(b))
	space := true // no leading space
	put := func(c byte) {
		if c == ' ' {
			if space {
				return
			}
			space = true
		} else {
			space = false
		}
		out = append(out, c)
	}
	for i := 0; i < len(b); {
		c := b[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRune(b[i:])
			i += n
			switch {
			case isInvisible(r):
			case r == 0xA0 || r == 0x2007 || r == 0x202F || r == 0x3000 || r >= 0x2000 && r <= 0x200A:
				put(' ')
			default:
				for _, x := range b[i-n : i] {
					put(x)
				}
			}
			continue
		}
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			put(' ')
			i++
		case markup && c == '<':
			if bytes.HasPrefix(b[i:], commentOpen) {
				put(' ')
				i += 4
				continue
			}
			// A tag: '<' then a letter, '/' or '!', not after another '<'. Anything else
			// ("<|im_start|>", "<<SYS>>", "a < b") is text.
			if (i == 0 || b[i-1] != '<') && i+1 < len(b) && (isLetter(b[i+1]) || b[i+1] == '/' || b[i+1] == '!' || b[i+1] == '?') {
				end := indexByteFrom(b, i+1, '>')
				if end >= 0 && end-i < 4096 {
					put(' ')
					i = end + 1
					continue
				}
			}
			put('<')
			i++
		case markup && c == '-' && i+2 < len(b) && b[i+1] == '-' && b[i+2] == '>':
			put(' ')
			i += 3
		case markup && c == '&':
			if r, n := entity(b[i:]); n > 0 {
				put(r)
				i += n
				continue
			}
			put('&')
			i++
		default:
			// A run of plain bytes (no space, markup or entity start) goes in at once.
			j := i
			for j < len(b) && plain[b[j]] {
				out = append(out, lowerTab[b[j]])
				j++
			}
			if j == i {
				put(c)
				j++
			} else {
				space = false
			}
			i = j
		}
	}
	return out
}

// plain are the ASCII bytes normalize copies as they are (lower-cased).
var plain, lowerTab = func() (p [256]bool, l [256]byte) {
	for c := 0; c < 256; c++ {
		l[c] = byte(c)
		if c >= 'A' && c <= 'Z' {
			l[c] = byte(c) + 'a' - 'A'
		}
		p[c] = c > ' ' && c < 0x7f && c != '<' && c != '&' && c != '-'
	}
	return
}()

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func indexByteFrom(b []byte, from int, c byte) int {
	if j := bytes.IndexByte(b[from:], c); j >= 0 {
		return from + j
	}
	return -1
}

var entities = []struct {
	name string
	c    byte
}{{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&#39;", '\''}, {"&apos;", '\''}, {"&nbsp;", ' '}, {"&#x27;", '\''}}

func entity(b []byte) (byte, int) {
	for _, e := range entities {
		if len(b) >= len(e.name) && strings.EqualFold(string(b[:len(e.name)]), e.name) {
			return e.c, len(e.name)
		}
	}
	return 0, 0
}
