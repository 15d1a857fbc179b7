package dlp

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/textproto"
	"net/url"
	"strings"
)

// Bodies are scanned by Content-Type: JSON (application/json, */*+json, NDJSON) as a decoded
// view with paths (jsonview.go); application/x-www-form-urlencoded field by field, decoded;
// multipart/form-data part by part, file names included, each part by its own Content-Type;
// everything else (text/*, unknown types, binary) as raw bytes.

// scanned is the outcome of scanning one piece of content.
type scanned struct {
	findings []Finding
	// redacted is the re-encoded content with redact matches replaced; nil if there were none.
	redacted []byte
	// cut says which text was not scanned whole and why (see budget); "" if all was.
	cut string
}

func (sc *scanned) addCut(phrase, cut string) {
	if cut != "" && sc.cut == "" {
		sc.cut = phrase + " was not scanned whole: " + cut
	}
}

// ScanContent scans a body of the given Content-Type (decoded: no Content-Encoding) located at
// where, for callers other than the HTTP proxy (MCP tool calls, for one). When the verdict is
// redact, redacted is the content with the matches replaced, encoded as the original was;
// otherwise it is nil.
func (s *Scanner) ScanContent(where, contentType string, b []byte) (v Verdict, redacted []byte) {
	sc := s.scanBody(b, contentType, where, s.newReqState())
	v.Findings = sc.findings
	if sc.cut != "" {
		s.applyCuts(&v, []string{sc.cut})
	}
	v.finish()
	if v.Action == ActionRedact {
		redacted = sc.redacted
	}
	return v, redacted
}

func mediaType(ct string) (string, map[string]string) {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		mt, _, _ = strings.Cut(strings.ToLower(strings.TrimSpace(ct)), ";")
	}
	return mt, params
}

func isJSONType(mt string) bool {
	return mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "application/x-ndjson" ||
		mt == "application/jsonl" || mt == "application/json-seq" || mt == "text/json"
}

func (s *Scanner) scanBody(b []byte, contentType, where string, rs *reqState) scanned {
	mt, params := mediaType(contentType)
	switch {
	case isJSONType(mt):
		return s.scanJSON(b, where, "", "the JSON body", rs)
	case mt == "application/x-www-form-urlencoded":
		return s.scanForm(b, where, "", "the form field ", rs)
	case strings.HasPrefix(mt, "multipart/") && params["boundary"] != "":
		if sc, ok := s.scanMultipart(b, params["boundary"], where, rs); ok {
			return sc
		}
	}
	return s.scanRaw(b, place{where: where, phrase: "the body"}, rs)
}

func (s *Scanner) scanRaw(b []byte, pl place, rs *reqState) scanned {
	ms, cut := s.scanText(b, rs)
	sc := scanned{findings: toFindings(b, ms, pl, 0)}
	sc.addCut(pl.phrase, cut)
	if hasRedact(ms) {
		sc.redacted = applyEdits(b, redactEdits(ms))
	}
	return sc
}

// scanJSON scans a JSON document. fieldPrefix is put before paths in Field ("part:data "), and
// phrase names the document in the reason ("the JSON body").
func (s *Scanner) scanJSON(raw []byte, where, fieldPrefix, phrase string, req *reqState) scanned {
	view, esc := jsonView(raw)
	if esc != nil {
		defer putView(view) // findings and redactions copy what they need
	}
	ms, cut := s.scanText(view, req)
	var sc scanned
	sc.addCut(phrase, cut)
	if len(ms) == 0 {
		return sc
	}
	rs, re := make([]int, len(ms)), make([]int, len(ms))
	last := 0
	for i, m := range ms {
		rs[i], re[i] = viewToRaw(esc, m.start, false), viewToRaw(esc, m.end, true)
		last = max(last, re[i])
	}
	var edits []edit // in the body
	for _, e := range redactEdits(ms) {
		edits = append(edits, edit{viewToRaw(esc, e.start, false), viewToRaw(esc, e.end, true), e.repl})
	}

	paths := make([]string, len(ms))
	w := &jsonWalker{raw: raw, hide: func(a, b int) bool {
		for i := range ms {
			if rs[i] < b && re[i] > a {
				return true
			}
		}
		return false
	}}
	var out []edit // edits made to fit the tokens
	p, ek := 0, 0
	ok := w.walk(func(t jsonToken) bool {
		for ; p < len(ms) && rs[p] < t.end; p++ {
			paths[p] = w.path()
		}
		for ; ek < len(edits) && edits[ek].end <= t.start; ek++ {
		}
		for k := ek; k < len(edits) && edits[k].start < t.end; k++ {
			e := edits[k]
			if t.kind == jsonNumber {
				if n := len(out); n == 0 || out[n-1].start != t.start {
					out = append(out, edit{t.start, t.end, `"` + e.repl + `"`})
				}
				continue
			}
			a, b := max(e.start, t.start+1), min(e.end, t.end-1)
			if a < b {
				if n := len(out); n > 0 && out[n-1].end > a { // two edits meet in one token
					out[n-1].end = max(out[n-1].end, b)
					continue
				}
				out = append(out, edit{a, b, e.repl})
			}
		}
		return p < len(ms) || t.end < last
	})

	for i := range ms {
		pl := place{where: where, phrase: phrase}
		if ok && paths[i] != "" {
			pl.field = fieldPrefix + paths[i]
			pl.phrase = phrase + " field " + paths[i]
		} else if fieldPrefix != "" {
			pl.field = strings.TrimSpace(fieldPrefix)
		}
		sc.findings = append(sc.findings, toFindings(view, ms[i:i+1], pl, 0)[0])
		sc.findings[i].Excerpt = excerpt(view, ms, i)
	}
	if len(edits) > 0 {
		if !ok { // not JSON we can follow: redact as text
			out = edits
		}
		sc.redacted = applyEdits(raw, out)
	}
	return sc
}

// scanForm scans application/x-www-form-urlencoded content (and, with where "query:", a URL
// query). Each field is scanned as "name=value" decoded, so rules that need the name see it.
func (s *Scanner) scanForm(b []byte, where, fieldPrefix, phrase string, rs *reqState) scanned {
	var sc scanned
	pairs := strings.Split(string(b), "&")
	changed := false
	for i, pair := range pairs {
		if pair == "" {
			continue
		}
		k, v, hasEq := strings.Cut(pair, "=")
		dk, err := url.QueryUnescape(k)
		if err != nil {
			dk = k
		}
		dv, err := url.QueryUnescape(v)
		if err != nil {
			dv = v
		}
		text := []byte(dk + "=" + dv)
		ms, cut := s.scanText(text, rs)
		sc.addCut(phrase+shortName(dk), cut)
		if len(ms) == 0 {
			continue
		}
		name := dk
		for _, m := range ms {
			if m.start < len(dk) {
				name = "[REDACTED]"
			}
		}
		name = shortName(name)
		pl := place{where: where, field: fieldPrefix + name, phrase: phrase + name}
		if where == "query" {
			pl = place{where: "query:" + name, phrase: phrase + name}
		}
		sc.findings = append(sc.findings, toFindings(text, ms, pl, len(dk)+1)...)
		if hasRedact(ms) {
			edits := redactEdits(ms)
			nk := string(applyEdits([]byte(dk), clipEdits(edits, 0, len(dk))))
			nv := string(applyEdits([]byte(dv), clipEdits(edits, len(dk)+1, len(text))))
			pairs[i] = url.QueryEscape(nk)
			if hasEq || nv != "" {
				pairs[i] += "=" + url.QueryEscape(nv)
			}
			changed = true
		}
	}
	if changed {
		sc.redacted = []byte(strings.Join(pairs, "&"))
	}
	return sc
}

// shortName makes a request-supplied name safe to show: printable and at most 64 bytes.
func shortName(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return printable([]byte(s), false)
}

// scanMultipart scans each part of a multipart body. ok is false if the body does not parse;
// it is then scanned as raw bytes.
func (s *Scanner) scanMultipart(b []byte, boundary, where string, rs *reqState) (scanned, bool) {
	type part struct {
		header  textproto.MIMEHeader
		content []byte
	}
	var parts []part
	mr := multipart.NewReader(bytes.NewReader(b), boundary)
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return scanned{}, false
		}
		content, err := io.ReadAll(p)
		if err != nil {
			return scanned{}, false
		}
		parts = append(parts, part{header: p.Header, content: content})
	}
	var sc scanned
	changed := false
	for i := range parts {
		p := &parts[i]
		disp, params, _ := mime.ParseMediaType(p.header.Get("Content-Disposition"))
		name := shortName(params["name"])
		if fn, ok := params["filename"]; ok && fn != "" {
			f := s.scanRaw([]byte(fn), place{where: where, field: "part:" + name + " filename",
				phrase: fmt.Sprintf("the file name of multipart part %q", name)}, rs)
			sc.findings = append(sc.findings, f.findings...)
			sc.addCut("a multipart file name", f.cut)
			if f.redacted != nil {
				params["filename"] = string(f.redacted)
				p.header.Set("Content-Disposition", mime.FormatMediaType(disp, params))
				changed = true
			}
		}
		var c scanned
		mt, _ := mediaType(p.header.Get("Content-Type"))
		phrase := fmt.Sprintf("multipart part %q", name)
		switch {
		case isJSONType(mt):
			c = s.scanJSON(p.content, where, "part:"+name+" ", "the JSON of "+phrase, rs)
		case mt == "application/x-www-form-urlencoded":
			c = s.scanForm(p.content, where, "part:"+name+" ", "the form field of "+phrase+": ", rs)
		default:
			c = s.scanRaw(p.content, place{where: where, field: "part:" + name, phrase: phrase}, rs)
		}
		sc.findings = append(sc.findings, c.findings...)
		if c.cut != "" && sc.cut == "" {
			sc.cut = c.cut
		}
		if c.redacted != nil {
			p.content = c.redacted
			changed = true
		}
	}
	if changed {
		var out bytes.Buffer
		mw := multipart.NewWriter(&out)
		if err := mw.SetBoundary(boundary); err != nil {
			return scanned{}, false
		}
		for _, p := range parts {
			pw, err := mw.CreatePart(p.header)
			if err != nil {
				return scanned{}, false
			}
			pw.Write(p.content)
		}
		mw.Close()
		sc.redacted = out.Bytes()
	}
	return sc, true
}
