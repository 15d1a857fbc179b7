package egress

import (
	"encoding/base32"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Host names are data: an agent can pack a secret or a stream of chunks into subdomain labels
// (<data>.attacker.example), and the name reaches the attacker's DNS server the moment anyone
// resolves it, whatever happens to the request afterwards. So the gateway checks the name as the
// sandbox sent it before any resolution (checkHost, called from handleConnect and handleRequest
// ahead of the SSRF guard's look-up), and a name that fails is refused without a DNS query.
//
// The checks, in order: the profile's DLP detectors on the name as sent, upper-cased when it is
// all lower case (DNS is case-insensitive, so an AKIA... key survives lower-casing only as
// akia...), on the subdomain labels joined (a key split across labels), and on what the labels
// decode to from base32 (the encoding DNS tunnels use; hex and base64 are decoded by the DLP
// scanner itself); then the length of each label and of the name; then the entropy of each
// label and of the joined subdomain part; then the session's budget of distinct subdomains under
// the name's registrable domain. Names under hostnames.exempt skip all but DLP.

// hostVerdict is what the checks decided about one name.
type hostVerdict struct {
	// action is the strongest: "", log or block (a DLP redact blocks: a name cannot be
	// rewritten).
	action    string
	reasons   []string // for the agent and the record; never the name's data
	detectors []string
}

func (v *hostVerdict) add(action, reason string, detectors ...string) {
	if rank(action) > rank(v.action) {
		v.action = action
	}
	for _, d := range detectors {
		if !slices.Contains(v.detectors, d) {
			v.detectors = append(v.detectors, d)
		}
	}
	v.reasons = append(v.reasons, reason)
}

func rank(a string) int {
	switch a {
	case "log":
		return 1
	case "redact":
		return 2
	case "block":
		return 3
	}
	return 0
}

// reason is the verdict for the agent: the blocking reasons first.
func (v *hostVerdict) reason() string {
	if len(v.reasons) == 0 {
		return ""
	}
	return strings.Join(v.reasons, "; ")
}

// hostParts splits a name into labels and says which are the subdomain (left of the registrable
// domain). sub is empty for a registrable domain, a public suffix or a single label.
func hostParts(name string) (labels []string, sub []string, dest string) {
	labels = strings.Split(name, ".")
	dest = destination(name)
	if n := strings.Count(dest, ".") + 1; n < len(labels) && strings.EqualFold(strings.Join(labels[len(labels)-n:], "."), dest) {
		sub = labels[:len(labels)-n]
	}
	return labels, sub, dest
}

// labelJudgement says whether one label (or a joined subdomain part) looks like data: too long,
// random, or a long run of hex.
func judgeLabel(s string, h *Hostnames) (random bool, bits float64) {
	flat := strings.ReplaceAll(s, "-", "")
	if randomHex(flat) {
		return true, shannon(flat)
	}
	if randomToken(flat, h.EntropyMinLength, h.EntropyBits) {
		return true, shannon(flat)
	}
	return false, 0
}

func exempt(h *Hostnames, name string) bool {
	return slices.ContainsFunc(h.Exempt, func(d string) bool { return matchDomain(d, strings.ToLower(name)) })
}

// checkHost checks host (as sent, port and brackets removed, case kept) for the session. It
// queries no resolver. count says the name may be counted against the session's budget (false
// for a look that decides nothing, e.g. in disabled mode; checkHost is then not called at all).
func (g *Gateway) checkHost(sb Sandbox, p *Profile, host string) hostVerdict {
	var v hostVerdict
	name := strings.TrimSuffix(host, ".")
	if name == "" {
		return v
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return v // an address carries four or sixteen bytes, and reaches no resolver
	}
	labels, sub, dest := hostParts(name)
	h := &p.Hostnames

	// DLP on the name and what it decodes to.
	if ti, ok := g.opts.Inspector.(TextInspector); ok {
		scan := func(where, text string) {
			var res TextResult
			var err error
			if where == "" {
				res, err = ti.InspectHost(text, &p.DLP)
			} else {
				res, err = ti.InspectText(where, text, &p.DLP)
			}
			if err != nil {
				v.add("block", "the host name could not be scanned: "+err.Error(), "dlp")
				return
			}
			if res.Action == "" {
				return
			}
			a := res.Action
			if a == "redact" {
				a = "block" // a host name cannot be rewritten
			}
			// The reason without its verb ("blocked: ", "redacted: ") and redaction note: the
			// gateway says what it did.
			reason := res.Reason
			if _, r, ok := strings.Cut(reason, ": "); ok {
				reason = r
			}
			if i := strings.Index(reason, "; the request was sent"); i >= 0 {
				reason = reason[:i]
			}
			v.add(a, reason, res.Detectors...)
		}
		scan("", name) // ScanHost
		if longLabel(labels) && strings.ToLower(name) == name && strings.ToUpper(name) != name {
			scan("the host name (upper-cased)", strings.ToUpper(name))
		}
		if len(sub) > 1 {
			joined := strings.Join(sub, "")
			scan("the host name's subdomain labels joined", joined)
			if dec, ok := base32Text(joined); ok {
				scan("the host name's subdomain labels decoded from base32", dec)
			}
		}
		for i, l := range sub {
			if dec, ok := base32Text(l); ok {
				scan(fmt.Sprintf("label %d of the host name, decoded from base32", i+1), dec)
			}
		}
	}

	if h.Action == "off" || exempt(h, name) {
		return v
	}
	act := h.Action
	if len(name) > h.MaxNameLength {
		v.add(act, fmt.Sprintf("the host name is %d characters long; profile %s allows %d (hostnames.max_name_length)", len(name), p.Name, h.MaxNameLength), "hostname:length")
	}
	labelFlagged := false
	for i, l := range labels {
		if len(l) > h.MaxLabelLength {
			labelFlagged = true
			v.add(act, fmt.Sprintf("label %d of the host name is %d characters long; profile %s allows %d (hostnames.max_label_length)", i+1, len(l), p.Name, h.MaxLabelLength), "hostname:length")
			continue
		}
		if random, bits := judgeLabel(l, h); random {
			labelFlagged = true
			v.add(act, fmt.Sprintf("label %d of the host name looks like encoded data (%d characters, %.1f bits per character)", i+1, len(l), bits), "hostname:entropy")
		}
	}
	if !labelFlagged && len(sub) > 1 {
		joined := strings.Join(sub, "")
		if random, bits := judgeLabel(joined, h); random {
			v.add(act, fmt.Sprintf("the subdomain labels of the host name, joined, look like encoded data (%d characters, %.1f bits per character)", len(joined), bits), "hostname:entropy")
		}
	}

	// The budget: only a name that passed the rest is counted, so a refused name costs nothing.
	if budget := *h.SubdomainBudget; budget > 0 && len(sub) > 0 && v.action != "block" && sb.Session != "" {
		n, ok := g.sessions.useName(sb.Session, dest, strings.ToLower(name), budget, act != "block" || p.Mode != ModeEnforce)
		if !ok {
			if n >= maxDests {
				v.add(act, fmt.Sprintf("this session has reached %d destinations", maxDests), "hostname:budget")
			} else {
				v.add(act, fmt.Sprintf("this would be subdomain %d of %s in this session; profile %s allows %d (hostnames.subdomain_budget): subdomains can carry data to the domain's DNS server", n, dest, p.Name, budget), "hostname:budget")
			}
		}
	}
	return v
}

// longLabel reports whether a label is long enough (15+) to hold a credential whose letters a
// lower-casing would hide (AWS keys are 20, IBANs 15 and more): shorter names are not scanned
// upper-cased.
func longLabel(labels []string) bool {
	for _, l := range labels {
		if len(l) >= 15 {
			return true
		}
	}
	return false
}

var base32NoPad = base32.StdEncoding.WithPadding(base32.NoPadding)

// base32Text decodes s as base32 (case-insensitive, unpadded) when it is at least 16 characters
// of the alphabet and decodes to mostly printable text.
func base32Text(s string) (string, bool) {
	if len(s) < 16 {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if !(c >= 'a' && c <= 'z' || s[i] >= '2' && s[i] <= '7') {
			return "", false
		}
	}
	n := len(s) - len(s)%8
	for _, cut := range []int{len(s), n} {
		if cut == 0 {
			continue
		}
		b, err := base32NoPad.DecodeString(strings.ToUpper(s[:cut]))
		if err != nil {
			continue
		}
		printable := 0
		for _, c := range b {
			if c >= 0x20 && c < 0x7f || c == '\n' || c == '\t' {
				printable++
			}
		}
		if printable*10 >= len(b)*9 {
			return string(b), true
		}
		return "", false
	}
	return "", false
}
