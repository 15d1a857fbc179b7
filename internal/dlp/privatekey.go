package dlp

import (
	"bytes"
	"strings"
)

// Private key blocks: "-----BEGIN <label>-----" where the label names a private key (RSA, EC,
// DSA, OPENSSH, ENCRYPTED, PGP ... PRIVATE KEY [BLOCK], or plain PKCS#8 "PRIVATE KEY"), then at
// least 64 base64 characters, through the matching END line. A block whose END line is missing
// (cut off) matches to the end of its base64 body. The block's text may have real or escaped
// ("\n") line breaks. Public keys and certificates do not match.

const maxKeyBlock = 64 << 10

// scanPrivateKeys checks the candidate starts (occurrences of "-----BEGIN ", in order).
func (s *Scanner) scanPrivateKeys(text []byte, starts []int, out []match) []match {
	next := 0
	for _, i := range starts {
		if i < next {
			continue
		}
		if m, ok := s.privateKeyAt(text, i); ok {
			out = append(out, m)
			next = m.end
		}
	}
	return out
}

func (s *Scanner) privateKeyAt(text []byte, start int) (match, bool) {
	ls := start + len("-----BEGIN ")
	le := bytes.Index(text[ls:min(len(text), ls+64)], []byte("-----"))
	if le < 0 {
		return match{}, false
	}
	label := string(text[ls : ls+le])
	if !strings.Contains(label, "PRIVATE KEY") {
		return match{}, false
	}
	bodyStart := ls + le + 5
	limit := min(len(text), bodyStart+maxKeyBlock)
	var end, bodyEnd int
	endLine := []byte("-----END " + label + "-----")
	if k := bytes.Index(text[bodyStart:limit], endLine); k >= 0 {
		bodyEnd = bodyStart + k
		end = bodyEnd + len(endLine)
	} else {
		j := bodyStart
		for j < limit {
			c := text[j]
			switch {
			case isWord(c) && c != '_', c == '+', c == '/', c == '=', c == '\n', c == '\r', c == ' ', c == '\t', c == ':', c == '-', c == ',':
				j++
			case c == '\\' && j+1 < limit && (text[j+1] == 'n' || text[j+1] == 'r'):
				j += 2
			default:
				limit = j
			}
		}
		bodyEnd, end = j, j
	}
	b64 := 0
	for _, c := range text[bodyStart:bodyEnd] {
		if isWord(c) || c == '+' || c == '/' {
			b64++
		}
	}
	if b64 < 64 {
		return match{}, false
	}
	kind := "pkcs8"
	if f := strings.Fields(strings.TrimSuffix(strings.TrimSuffix(label, " BLOCK"), "PRIVATE KEY")); len(f) > 0 {
		kind = strings.ToLower(strings.Join(f, "-"))
	}
	return match{detector: DetectorPrivateKey, rule: kind, desc: "a private key block (" + label + ")",
		start: start, end: end, action: s.cfg.action(DetectorPrivateKey, kind)}, true
}
