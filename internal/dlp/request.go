package dlp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// ScanRequest scans r's URL path, host, user info, query, headers and body, and returns the
// verdict. It reads the body (at most Config.MaxBodyBytes of it; the rest streams on unread) and
// always leaves r.Body readable from the start, closing the original when closed.
//
// When the verdict is ActionRedact, r has been rewritten so the origin receives the redacted
// version: the body re-encoded with the same Content-Encoding and a correct ContentLength and
// Content-Length header (chunked transfer is dropped), headers and query replaced, the path
// re-escaped, and RequestURI, if set, rebuilt. On other verdicts r is as it came. A finding
// whose action is redact in a place that cannot be rewritten (host, user info, a header name, an
// oversize body scanned by prefix) blocks instead.
//
// The error is non-nil only when reading the body fails; the verdict is then empty and r.Body
// still yields what was read followed by the rest.
func (s *Scanner) ScanRequest(r *http.Request) (Verdict, error) {
	var v Verdict
	rs := s.newReqState()
	var rewrites []func()
	var cuts []string // texts not scanned whole
	cut := func(phrase, why string) {
		if why != "" {
			cuts = append(cuts, phrase+" was not scanned whole: "+why)
		}
	}

	// URL path, host and user info.
	if r.URL != nil {
		if p := r.URL.Path; p != "" {
			ms, why := s.scanText([]byte(p), rs)
			cut("the URL path", why)
			v.Findings = append(v.Findings, toFindings([]byte(p), ms, place{where: "url", phrase: "the URL path"}, 0)...)
			if hasRedact(ms) {
				np := string(applyEdits([]byte(p), redactEdits(ms)))
				rewrites = append(rewrites, func() { r.URL.Path, r.URL.RawPath = np, "" })
			}
		}
		if u := r.URL.User; u != nil {
			t := []byte(u.String())
			ms, why := s.scanText(t, rs)
			cut("the URL's user info", why)
			v.Findings = append(v.Findings, unredactable(toFindings(t, ms, place{where: "userinfo", phrase: "the URL's user info"}, 0))...)
		}
	}
	host := r.Host
	if r.URL != nil && r.URL.Host != "" {
		host = r.URL.Host
	}
	if host != "" {
		t := []byte(host)
		ms, why := s.scanText(t, rs)
		cut("the host name", why)
		v.Findings = append(v.Findings, unredactable(toFindings(t, ms, place{where: "host", phrase: "the host name"}, 0))...)
	}

	// Query.
	if r.URL != nil && r.URL.RawQuery != "" {
		sc := s.scanForm([]byte(r.URL.RawQuery), "query", "", "the query parameter ", rs)
		v.Findings = append(v.Findings, sc.findings...)
		if sc.cut != "" {
			cuts = append(cuts, sc.cut)
		}
		if sc.redacted != nil {
			q := string(sc.redacted)
			rewrites = append(rewrites, func() { r.URL.RawQuery = q })
		}
	}

	// Headers, in name order.
	names := make([]string, 0, len(r.Header))
	for name := range r.Header {
		if !s.ignoreHeaders[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		for i, val := range r.Header[name] {
			prefix := name + ": "
			t := []byte(prefix + val)
			ms, why := s.scanText(t, rs)
			cut("the header "+shortName(name), why)
			if len(ms) == 0 {
				continue
			}
			fs := toFindings(t, ms, place{where: "header:" + shortName(name), phrase: "the header " + shortName(name)}, len(prefix))
			inName := false
			for _, m := range ms {
				inName = inName || m.start < len(name)
			}
			if inName {
				fs = unredactable(fs)
			}
			v.Findings = append(v.Findings, fs...)
			if hasRedact(ms) && !inName {
				nv := string(applyEdits([]byte(val), clipEdits(redactEdits(ms), len(prefix), len(t))))
				name, i := name, i
				rewrites = append(rewrites, func() { r.Header[name][i] = nv })
			}
		}
	}

	// Body.
	if r.Body != nil && r.Body != http.NoBody {
		rw, bodyCut, err := s.scanRequestBody(r, &v, rs)
		if err != nil {
			return Verdict{}, err
		}
		if rw != nil {
			rewrites = append(rewrites, rw)
		}
		if bodyCut != "" {
			cuts = append(cuts, bodyCut)
		}
	}

	s.applyCuts(&v, cuts)
	v.finish()
	if v.Action == ActionRedact {
		for _, rw := range rewrites {
			rw()
		}
		if r.RequestURI != "" && r.URL != nil {
			if strings.HasPrefix(r.RequestURI, "/") {
				r.RequestURI = r.URL.RequestURI()
			} else {
				r.RequestURI = r.URL.String()
			}
		}
	}
	return v, nil
}

// unredactable turns redact into block for findings in places that cannot be rewritten.
func unredactable(fs []Finding) []Finding {
	for i := range fs {
		if fs[i].Action == ActionRedact {
			fs[i].Action = ActionBlock
			fs[i].desc += " (which cannot be redacted there)"
		}
	}
	return fs
}

// bodyReader is a replacement body that closes the original.
type bodyReader struct {
	io.Reader
	orig io.Closer
}

func (b bodyReader) Close() error { return b.orig.Close() }

// Interface guards
var (
	_ io.ReadCloser = bodyReader{}
	_ error         = errUnsupportedEncoding("")
)

// scanRequestBody reads, decodes and scans r's body, restores r.Body and returns the rewrite to
// apply if the verdict turns out to be redact, and why the scan was cut short if it was.
func (s *Scanner) scanRequestBody(r *http.Request, v *Verdict, rs *reqState) (rewrite func(), cut string, err error) {
	limit := s.cfg.MaxBodyBytes
	orig := r.Body
	raw, err := readAtMost(orig, limit+1, r.ContentLength)
	r.Body = bodyReader{io.MultiReader(bytes.NewReader(raw), orig), orig}
	if err != nil {
		return nil, "", fmt.Errorf("dlp: reading the request body: %w", err)
	}
	codings := contentEncodings(r.Header.Get("Content-Encoding"))
	ctype := r.Header.Get("Content-Type")

	var unscanned string // why the body cannot be scanned whole
	var decoded []byte
	if int64(len(raw)) > limit {
		unscanned = fmt.Sprintf("the request body is larger than the %s the DLP scans", sizeString(limit))
		if s.cfg.Oversize == OversizeScanPrefix && len(codings) > 0 {
			decoded, _ = decodeBody(raw, codings, limit) // a prefix of the stream decodes
		}
	} else {
		decoded, err = decodeBody(raw, codings, limit)
		var unsupported errUnsupportedEncoding
		switch {
		case errors.As(err, &unsupported):
			unscanned = "the request body has a " + err.Error()
		case err != nil:
			unscanned = "the request body could not be decoded (" + err.Error() + ")"
		case int64(len(decoded)) > limit:
			unscanned = fmt.Sprintf("the request body decodes to more than the %s the DLP scans", sizeString(limit))
		}
	}

	if unscanned == "" {
		sc := s.scanBody(decoded, ctype, "body", rs)
		v.Findings = append(v.Findings, sc.findings...)
		if sc.redacted == nil {
			return nil, sc.cut, nil
		}
		enc, err := encodeBody(sc.redacted, codings)
		if err != nil { // cannot happen for the codings decodeBody accepted
			return nil, "", fmt.Errorf("dlp: re-encoding the redacted body: %w", err)
		}
		return func() {
			r.Body = bodyReader{bytes.NewReader(enc), orig}
			r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(enc)), nil }
			r.ContentLength = int64(len(enc))
			r.TransferEncoding = nil
			if r.Header.Get("Content-Length") != "" {
				r.Header.Set("Content-Length", strconv.Itoa(len(enc)))
			}
		}, sc.cut, nil
	}

	switch s.cfg.Oversize {
	case OversizeBlock:
		v.Unscanned = unscanned
		v.forced = "blocked: " + unscanned
	case OversizeAllowUnscanned:
		v.Unscanned = unscanned
	case OversizeScanPrefix:
		prefix := decoded
		if len(prefix) == 0 && len(codings) == 0 {
			prefix = raw
		}
		prefix = prefix[:min(int64(len(prefix)), limit)]
		v.Unscanned = unscanned + "; only its first " + sizeString(int64(len(prefix))) + " were scanned"
		sc := s.scanRaw(prefix, place{where: "body", phrase: "the first " + sizeString(limit) + " of the body"}, rs)
		v.Findings = append(v.Findings, unredactable(sc.findings)...)
		return nil, sc.cut, nil
	}
	return nil, "", nil
}

// readAtMost reads up to n bytes, sized for the expected length (-1 if unknown) so a body of the
// length it announced is read into one allocation.
func readAtMost(r io.Reader, n, expect int64) ([]byte, error) {
	buf := make([]byte, 0, min(max(expect, 4096), n-1)+1)
	for int64(len(buf)) < n {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		k, err := r.Read(buf[len(buf):min(int64(cap(buf)), n)])
		buf = buf[:len(buf)+k]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

func sizeString(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
