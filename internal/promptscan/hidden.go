package promptscan

import (
	"bytes"
)

// Bounds of the hidden-text search: how far a region may reach, how many regions are judged.
const (
	maxRegion  = 64 << 10
	maxRegions = 4096
)

// voidElements have no content, so hiding them hides no text (an <input type=hidden> carries a
// value, not prose).
var voidElements = map[string]bool{"area": true, "base": true, "br": true, "col": true, "embed": true, "hr": true,
	"img": true, "input": true, "link": true, "meta": true, "param": true, "source": true, "track": true, "wbr": true}

// hiddenText finds HTML comments and hidden elements and reports those whose text reads as an
// instruction to a model.
func hiddenText(b []byte) []Finding {
	lower := asciiLower(b)
	var out []Finding
	regions := 0
	judge := func(rule string, region []byte) {
		regions++
		if len(region) == 0 {
			return
		}
		for _, id := range matchPhrases(normalize(region, true), true) {
			out = append(out, Finding{Kind: KindHiddenText, Rule: rule, Phrase: id, Count: 1})
		}
	}

	// Comments.
	for from := 0; from < len(lower) && regions < maxRegions; {
		i := bytes.Index(lower[from:], commentOpen)
		if i < 0 {
			break
		}
		start := from + i + len(commentOpen)
		end := bytes.Index(lower[start:], commentClose)
		if end < 0 {
			end = len(lower) - start
		}
		end = min(end, maxRegion)
		if !bytes.HasPrefix(lower[start:], []byte("[if")) { // conditional comments hold markup
			judge(RuleHTMLComment, b[start:start+end])
		}
		from = start + end
	}

	// Elements hidden by an inline style or the hidden attribute.
	seen := map[int]bool{} // start tags already judged
	for _, h := range hiders {
		for from := 0; from < len(lower) && regions < maxRegions; {
			i := bytes.Index(lower[from:], h.prop)
			if i < 0 {
				break
			}
			pos := from + i
			from = pos + len(h.prop)
			if !h.match(lower, pos) {
				continue
			}
			tagStart, name, ok := enclosingStartTag(lower, pos)
			if !ok || seen[tagStart] || voidElements[name] {
				continue
			}
			seen[tagStart] = true
			open := bytes.IndexByte(lower[pos:], '>')
			if open < 0 {
				continue
			}
			cs := pos + open + 1
			judge(h.rule, b[cs:closingTag(lower, cs, name)])
		}
	}
	return out
}

// hider is one way of hiding an element.
type hider struct {
	rule  string
	prop  []byte
	match func(lower []byte, pos int) bool
}

var hiders = []hider{
	{RuleDisplayNone, []byte("display"), cssValue("display", "none")},
	{RuleVisibility, []byte("visibility"), cssValue("visibility", "hidden")},
	{RuleZeroFont, []byte("font-size"), cssZero("font-size")},
	{RuleZeroOpacity, []byte("opacity"), cssZero("opacity")},
	{RuleHiddenAttr, []byte("hidden"), hiddenAttr},
}

// cssValue matches "prop : value" (spaces optional) followed by a delimiter.
func cssValue(prop, value string) func([]byte, int) bool {
	return func(b []byte, pos int) bool {
		if pos > 0 && isNameChar(b[pos-1]) {
			return false
		}
		j := skipSpaces(b, pos+len(prop))
		if j >= len(b) || b[j] != ':' {
			return false
		}
		j = skipSpaces(b, j+1)
		if !bytes.HasPrefix(b[j:], []byte(value)) {
			return false
		}
		j += len(value)
		return j >= len(b) || !isNameChar(b[j])
	}
}

// cssZero matches "prop: 0" with an optional unit or decimal zeros ("0px", "0.0em", "0%").
func cssZero(prop string) func([]byte, int) bool {
	return func(b []byte, pos int) bool {
		if pos > 0 && isNameChar(b[pos-1]) {
			return false
		}
		j := skipSpaces(b, pos+len(prop))
		if j >= len(b) || b[j] != ':' {
			return false
		}
		j = skipSpaces(b, j+1)
		if j >= len(b) || b[j] != '0' {
			return false
		}
		j++
		if j < len(b) && b[j] == '.' {
			j++
			for j < len(b) && b[j] == '0' {
				j++
			}
		}
		return j >= len(b) || !(b[j] >= '0' && b[j] <= '9' || b[j] == '.')
	}
}

// hiddenAttr matches the bare attribute hidden (not type="hidden", not a class name).
func hiddenAttr(b []byte, pos int) bool {
	if pos == 0 || !(b[pos-1] == ' ' || b[pos-1] == '\t' || b[pos-1] == '\n' || b[pos-1] == '\r') {
		return false
	}
	j := pos + len("hidden")
	return j >= len(b) || b[j] == ' ' || b[j] == '>' || b[j] == '/' || b[j] == '=' || b[j] == '\t' || b[j] == '\n'
}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func skipSpaces(b []byte, j int) int {
	for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\n' || b[j] == '\r') {
		j++
	}
	return j
}

// enclosingStartTag finds the start tag pos is inside: the last '<' before pos with no '>'
// between, followed by a letter. It returns the tag's offset and its name.
func enclosingStartTag(b []byte, pos int) (int, string, bool) {
	lo := max(0, pos-4096)
	lt := bytes.LastIndexByte(b[lo:pos], '<')
	if lt < 0 {
		return 0, "", false
	}
	lt += lo
	if bytes.IndexByte(b[lt:pos], '>') >= 0 || lt+1 >= len(b) || !isLetter(b[lt+1]) {
		return 0, "", false
	}
	j := lt + 1
	for j < len(b) && isNameChar(b[j]) {
		j++
	}
	return lt, string(b[lt+1 : j]), true
}

// closingTag returns where the element whose content starts at from ends: before its matching
// "</name", counting nested elements of the same name, within maxRegion.
func closingTag(b []byte, from int, name string) int {
	limit := min(len(b), from+maxRegion)
	openTag, closeTag := []byte("<"+name), []byte("</"+name)
	depth := 0
	for j := from; j < limit; {
		k := bytes.IndexByte(b[j:limit], '<')
		if k < 0 {
			break
		}
		j += k
		switch {
		case bytes.HasPrefix(b[j:], closeTag) && (j+len(closeTag) >= len(b) || !isNameChar(b[j+len(closeTag)])):
			if depth == 0 {
				return j
			}
			depth--
		case bytes.HasPrefix(b[j:], openTag) && (j+len(openTag) >= len(b) || !isNameChar(b[j+len(openTag)])):
			depth++
		}
		j++
	}
	return limit
}

// asciiLower lower-cases ASCII letters and leaves every other byte, so offsets stay the same.
func asciiLower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}
