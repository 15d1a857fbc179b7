package dlp

import "strings"

// Helpers for the egress gateway beyond ScanRequest: the host name before it is resolved, the
// fields of an audit record, and the entropy of a token.

// ScanHost scans a host name (or a host:port) the way ScanRequest scans a request's host: as
// text, its labels decoded where they decode (hex, base64, percent-encoding; a label is a token
// of its own, since '.' ends one). It is meant to run before the name is resolved, so that data
// packed into labels is refused without a DNS query. A finding there cannot be redacted: a redact
// action blocks. Config.Oversize applies as for a request (a name is far below every limit).
func (s *Scanner) ScanHost(host string) Verdict {
	t := []byte(host)
	ms, cut := s.scanText(t, s.newReqState())
	var v Verdict
	v.Findings = unredactable(toFindings(t, ms, place{where: "host", phrase: "the host name"}, 0))
	if cut != "" {
		s.applyCuts(&v, []string{"the host name was not scanned whole: " + cut})
	}
	v.finish()
	return v
}

// RedactText returns b with every finding replaced by its token ([REDACTED:<name>]), whatever
// the finding's action (log included; detectors whose action is allow find nothing), and the
// verdict. It is for texts kept rather than sent, such as the fields of an audit record: build
// the Scanner with the actions of the detectors to take out (e.g. every key of DefaultActions
// mapped to ActionRedact). A finding under an encoding replaces the whole encoded token. When b
// holds nothing, it is returned as it is.
func (s *Scanner) RedactText(where string, b []byte) ([]byte, Verdict) {
	ms, cut := s.scanText(b, s.newReqState())
	var v Verdict
	v.Findings = toFindings(b, ms, place{where: where, phrase: where}, 0)
	if cut != "" {
		s.applyCuts(&v, []string{where + " was not scanned whole: " + cut})
	}
	v.finish()
	if len(ms) == 0 {
		return b, v
	}
	all := make([]match, len(ms))
	for i, m := range ms {
		m.action = ActionRedact
		all[i] = m
	}
	return applyEdits(b, redactEdits(all)), v
}

// Entropy is the Shannon entropy of b in bits per byte, as gitleaks computes it for its
// thresholds (3.5 for its generic rule): about 4 for hex, 5 to 6 for base64 and random
// alphanumerics of some length, under 3 for words. It is meant for high-entropy tokens with no
// known shape, in paths, query values and host labels.
func Entropy(b []byte) float64 { return shannonEntropy(b) }

// HostLabels splits a host name into its labels, without a port and a trailing dot.
func HostLabels(host string) []string {
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		host = host[:i]
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if host == "" {
		return nil
	}
	return strings.Split(host, ".")
}
