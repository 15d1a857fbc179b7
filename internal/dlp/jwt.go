package dlp

import (
	"encoding/base64"
	"encoding/json"
)

// JSON Web Tokens: three (JWS) or five (JWE) base64url segments separated by dots, the first
// starting "eyJ" (base64 of `{"`) and decoding to a JSON object with an "alg" member; for a JWS
// the second must decode to a JSON object too. The signature may be empty (alg "none"). Checking
// the decoded header is what keeps dotted identifiers that happen to start with eyJ out.

func isB64URL(c byte) bool { return isWord(c) || c == '-' }

// scanJWTs checks the candidate starts (occurrences of "eyJ", in order).
func (s *Scanner) scanJWTs(text []byte, starts []int, out []match) []match {
	next := 0
	for _, i := range starts {
		if i < next || (i > 0 && (isB64URL(text[i-1]) || text[i-1] == '.')) {
			continue
		}
		if m, ok := s.jwtAt(text, i); ok {
			out = append(out, m)
			next = m.end
		}
	}
	return out
}

func (s *Scanner) jwtAt(text []byte, start int) (match, bool) {
	var segs [][]byte
	for i := start; len(segs) < 5; {
		j := i
		for j < len(text) && isB64URL(text[j]) {
			j++
		}
		segs = append(segs, text[i:j])
		if j >= len(text) || text[j] != '.' {
			break
		}
		i = j + 1
	}
	if len(segs) == 4 { // a JWS followed by a dot and more text
		segs = segs[:3]
	}
	if len(segs) != 3 && len(segs) != 5 {
		return match{}, false
	}
	end := start
	for k, sg := range segs {
		end += len(sg)
		if k > 0 {
			end++
		}
	}
	if end < len(text) && isB64URL(text[end]) {
		return match{}, false
	}
	var hdr map[string]any
	if !decodeJSONSeg(segs[0], &hdr) {
		return match{}, false
	}
	if _, ok := hdr["alg"].(string); !ok {
		return match{}, false
	}
	if len(segs) == 3 {
		var payload map[string]any
		if len(segs[1]) == 0 || !decodeJSONSeg(segs[1], &payload) {
			return match{}, false
		}
	}
	return match{detector: DetectorJWT, desc: "a JSON Web Token", start: start, end: end,
		action: s.cfg.action(DetectorJWT, "")}, true
}

func decodeJSONSeg(seg []byte, v any) bool {
	if len(seg) < 4 || len(seg) > 64<<10 {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(string(seg))
	if err != nil {
		return false
	}
	return json.Unmarshal(raw, v) == nil
}
