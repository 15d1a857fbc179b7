package dlp

import "bytes"

// Redaction replaces each match whose action is redact with [REDACTED:<name>]. A fixed token
// rather than a same-length mask: it says what was removed, cannot be mistaken for data, and a
// format that checks length or checksum rejects a mask as surely as a token. Matches that
// overlap are redacted as their union, with the token of the first. Redaction is done on the
// decoded text and re-encoded for where the text came from (JSON string, form value, URL path).

// edit replaces text[start:end] with repl.
type edit struct {
	start, end int
	repl       string
}

// redactEdits returns the merged, ordered edits for the redact matches in ms (ordered by start).
func redactEdits(ms []match) []edit {
	var out []edit
	for _, m := range ms {
		if m.action != ActionRedact {
			continue
		}
		if n := len(out); n > 0 && m.start < out[n-1].end {
			out[n-1].end = max(out[n-1].end, m.end)
			continue
		}
		out = append(out, edit{m.start, m.end, m.token()})
	}
	return out
}

// applyEdits returns b with the ordered, non-overlapping edits applied.
func applyEdits(b []byte, edits []edit) []byte {
	if len(edits) == 0 {
		return b
	}
	var out bytes.Buffer
	out.Grow(len(b))
	prev := 0
	for _, e := range edits {
		out.Write(b[prev:e.start])
		out.WriteString(e.repl)
		prev = e.end
	}
	out.Write(b[prev:])
	return out.Bytes()
}

// clipEdits returns the edits restricted to [lo, hi), shifted by -lo.
func clipEdits(edits []edit, lo, hi int) []edit {
	var out []edit
	for _, e := range edits {
		s, t := max(e.start, lo), min(e.end, hi)
		if s < t || (s == t && e.start == e.end) {
			out = append(out, edit{s - lo, t - lo, e.repl})
		}
	}
	return out
}

// hasRedact reports whether any match is to be redacted.
func hasRedact(ms []match) bool {
	for _, m := range ms {
		if m.action == ActionRedact {
			return true
		}
	}
	return false
}
