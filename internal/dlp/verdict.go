package dlp

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Verdict is the outcome of a scan.
type Verdict struct {
	// Action is the strongest action among the findings (ActionAllow when there are none), or
	// ActionBlock when the body could not be scanned and the oversize policy blocks.
	Action Action
	// Findings lists every match of an enabled detector, including those whose action is log, in
	// the order the request was scanned (URL, query, headers, body).
	Findings []Finding
	// Reason is one line for the agent: what was found where, and what was done, e.g.
	// "blocked: a payment card number (Visa) in the JSON body field $.payment.card". Empty when
	// Action is allow.
	Reason string
	// Unscanned says which part of the request was not scanned and why (oversize body, unknown
	// Content-Encoding); empty when everything was.
	Unscanned string

	forced string // a block reason that applies without findings (oversize body)
}

// Finding is one match. It never holds the matched text itself: only where it is and an excerpt
// of its surroundings in which the match is replaced by its redaction token.
type Finding struct {
	// Detector is a built-in detector name (DetectorPaymentCard, ...) or DetectorCustom.
	Detector string
	// Rule refines the detector: the gitleaks rule id for secrets ("aws-access-token"), the
	// brand for payment cards ("visa"), the key type for private keys ("rsa"), the custom
	// detector's name; empty for the others.
	Rule string
	// Action is the configured action for this detector and rule.
	Action Action
	// Where is the part of the request: "url" (the path), "host", "query:<name>",
	// "header:<Name>", or "body".
	Where string
	// Field narrows Where for structured bodies: a JSON path ("$.payment.card"), a form field
	// name, or "part:<name>" for multipart parts (with " filename" when the match is in the file
	// name, and a JSON path after a space for JSON parts). Empty for text bodies, the URL and
	// headers. Names that contain a match themselves are shown as [REDACTED].
	Field string
	// Offset and Length locate the match in the decoded text of Where and Field: the
	// percent-decoded path or query value, the header value, or the decoded body (for JSON, the
	// body with its string escapes decoded).
	Offset, Length int
	// Encoding is the chain of encodings the match was found under, outermost first, e.g.
	// "base64 → hex" or "percent-encoding → base64"; empty for a match in the text as it was.
	// Offset and Length then locate the encoded token (for base64, hex and gzip the whole token,
	// which is what redaction replaces; for percent-encoding and quoted-printable the escapes
	// that spell the match).
	Encoding string
	// Excerpt is up to 24 bytes either side of the match with the match replaced by
	// [REDACTED:<name>]; other matches nearby are cut off, not shown.
	Excerpt string

	desc  string // "a payment card number (Visa)"
	place string // "the JSON body field $.payment.card"
}

// Token is the text that replaces the match when it is redacted: [REDACTED:<name>], the name
// being the rule for secrets and custom detectors and the detector otherwise.
func (f Finding) Token() string { return redactionToken(f.Detector, f.Rule) }

func redactionToken(detector, rule string) string {
	name := detector
	if (detector == DetectorSecret || detector == DetectorCustom) && rule != "" {
		name = rule
	}
	return "[REDACTED:" + name + "]"
}

// match is a detector hit in one scanned text, before it is placed in the request.
type match struct {
	detector, rule string
	desc           string
	enc            string // the encoding chain the match was found under, or ""
	start, end     int    // the span to redact
	action         Action
}

// preferred orders matches of one span: stronger action first, then a specific rule before
// gitleaks' generic one.
func (m match) preferred(o match) bool {
	if m.action.rank() != o.action.rank() {
		return m.action.rank() > o.action.rank()
	}
	return m.rule != "generic-api-key" && o.rule == "generic-api-key"
}

func (m match) token() string { return redactionToken(m.detector, m.rule) }

// excerpt renders text around ms[i] with the match replaced by its token. Context stops at
// another match, at a line break and after 24 bytes, and is made valid, printable UTF-8.
func excerpt(text []byte, ms []match, i int) string {
	const ctx = 24
	m := ms[i]
	lo, hi := max(0, m.start-ctx), min(len(text), m.end+ctx)
	for j, o := range ms {
		if j == i {
			continue
		}
		if o.end <= m.start && o.end > lo {
			lo = o.end
		}
		if o.start >= m.end && o.start < hi {
			hi = o.start
		}
		if o.start < m.start && o.end > m.start { // overlapping: no left context
			lo = m.start
		}
		if o.start < m.end && o.end > m.end {
			hi = m.end
		}
	}
	before, after := text[lo:m.start], text[m.end:hi]
	if k := strings.LastIndexAny(string(before), "\r\n"); k >= 0 {
		before = before[k+1:]
	}
	if k := strings.IndexAny(string(after), "\r\n"); k >= 0 {
		after = after[:k]
	}
	return printable(before, true) + m.token() + printable(after, false)
}

// printable drops partial UTF-8 at the cut end and replaces control characters.
func printable(b []byte, cutAtStart bool) string {
	if cutAtStart {
		for len(b) > 0 && !utf8.RuneStart(b[0]) {
			b = b[1:]
		}
	} else {
		for n := 0; n < 3 && len(b) > 0 && !utf8.Valid(b); n++ {
			b = b[:len(b)-1]
		}
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return ' '
		}
		return r
	}, string(b))
}

// finish computes the verdict's action and reason from its findings.
func (v *Verdict) finish() {
	var top *Finding
	for i := range v.Findings {
		f := &v.Findings[i]
		if top == nil || f.Action.rank() > top.Action.rank() {
			top = f
		}
	}
	v.Action = ActionAllow
	if top != nil {
		v.Action = top.Action
	}
	if v.forced != "" && v.Action != ActionBlock {
		v.Action, v.Reason = ActionBlock, v.forced
		return
	}
	if v.Action == ActionAllow {
		return
	}
	verb := map[Action]string{ActionLog: "logged", ActionRedact: "redacted", ActionBlock: "blocked"}[v.Action]
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s in %s", verb, top.desc, top.place)
	same := 0
	for _, f := range v.Findings {
		if f.Action == v.Action {
			same++
		}
	}
	if same > 1 {
		fmt.Fprintf(&b, " (and %d more)", same-1)
	}
	if v.Action == ActionRedact {
		b.WriteString("; the request was sent with it replaced by " + top.Token())
	}
	v.Reason = b.String()
}
