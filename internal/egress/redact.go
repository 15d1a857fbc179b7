package egress

import (
	"net"
	"net/url"
	"sort"
	"strings"
)

// Records without secrets. Every event the gateway emits (to the recorder, the log, the alert
// monitor and from there to alerts, webhooks and the reason a session is ended with) passes
// redactEvent first, whatever the decision and whichever checks ran, so a request refused by the
// policy before DLP looked at it is redacted as well as one DLP blocked. In the URL (host, path,
// query), the headers and the reason:
//
//   - labels of the host that are too long or look like encoded data (hostnames.*) become
//     [REDACTED:hostname], and a subdomain part that looks like data as a whole loses all its
//     labels (the registrable domain stays, so the record says where the request went);
//   - tokens that look random (entropy.*) become [REDACTED:entropy];
//   - whatever any DLP detector finds (every built-in detector and the profile's custom ones,
//     whatever the profile's actions, through TextInspector.RedactFields) becomes its token;
//   - what was replaced in the URL is replaced in the reason too (policy and SSRF reasons name
//     the host and path).
//
// The fragment is dropped (it is never sent) and user info was masked already (redactURL).

const (
	hostToken    = "[REDACTED:hostname]"
	entropyToken = "[REDACTED:entropy]"
)

// redactEvent rewrites ev's URL, headers and reason for the record.
func (g *Gateway) redactEvent(ev *Event, p *Profile) {
	if p == nil {
		return
	}
	var pairs []string // old, new: what the reason must lose too
	swap := func(old, tok string) {
		if old != "" {
			pairs = append(pairs, old, tok)
			if l := strings.ToLower(old); l != old {
				pairs = append(pairs, l, tok)
			}
			if e := url.PathEscape(old); e != old {
				pairs = append(pairs, e, tok)
			}
			if e := url.QueryEscape(old); e != old {
				pairs = append(pairs, e, tok)
			}
		}
	}

	// Split the URL: scheme://[userinfo@]host[:port]/path?query, or host:port for a tunnel.
	raw := ev.URL
	scheme, rest, hasScheme := strings.Cut(raw, "://")
	if !hasScheme {
		scheme, rest = "", raw
	}
	authority, pathQuery := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, pathQuery = rest[:i], rest[i:]
	}
	if i := strings.IndexByte(pathQuery, '#'); i >= 0 {
		pathQuery = pathQuery[:i]
	}
	userinfo := ""
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		userinfo, authority = authority[:i+1], authority[i+1:]
	}
	host, port := authority, ""
	if h, pt, err := net.SplitHostPort(authority); err == nil {
		host, port = h, pt
	}
	rawPath, rawQuery, _ := strings.Cut(pathQuery, "?")
	path, err := url.PathUnescape(rawPath)
	if err != nil {
		path = rawPath
	}

	// Host labels.
	newHost := host
	if !exempt(&p.Hostnames, host) && strings.Trim(host, "[]") == host {
		labels, sub, _ := hostParts(strings.TrimSuffix(host, "."))
		changed := false
		for i, l := range labels {
			if len(l) > p.Hostnames.MaxLabelLength {
				swap(l, hostToken)
				labels[i], changed = hostToken, true
			} else if random, _ := judgeLabel(l, &p.Hostnames); random {
				swap(l, hostToken)
				labels[i], changed = hostToken, true
			}
		}
		if !changed && len(sub) > 1 {
			if random, _ := judgeLabel(strings.Join(sub, ""), &p.Hostnames); random {
				for i := range sub {
					swap(labels[i], hostToken)
					labels[i] = hostToken
				}
				changed = true
			}
		}
		if changed {
			newHost = strings.Join(labels, ".")
		}
	}

	// Random tokens in the path, the query and the headers.
	e := &p.Entropy
	detok := func(s string) string {
		if len(s) < e.MinLength {
			return s
		}
		for _, tok := range randomTokens(s, e.MinLength, e.Bits, 64) {
			swap(tok, entropyToken)
			s = strings.ReplaceAll(s, tok, entropyToken)
		}
		return s
	}
	newPath := detok(path)
	var query []queryPair
	if rawQuery != "" {
		for _, part := range strings.Split(rawQuery, "&") {
			k, v, _ := strings.Cut(part, "=")
			if dk, err := url.QueryUnescape(k); err == nil {
				k = dk
			}
			if dv, err := url.QueryUnescape(v); err == nil {
				v = dv
			}
			query = append(query, queryPair{detok(k), detok(v)})
		}
	}
	names := make([]string, 0, len(ev.Headers))
	for name := range ev.Headers {
		names = append(names, name)
	}
	sort.Strings(names)
	headers := make([]string, len(names))
	for i, name := range names {
		headers[i] = detok(ev.Headers[name])
	}
	reason := ev.Reason
	if len(pairs) > 0 && reason != "" {
		reason = strings.NewReplacer(pairs...).Replace(reason)
	}

	// DLP, every detector, over all of it at once. The host and the reason are scanned upper-cased
	// too: DNS names are case-insensitive, and the policy writes the host in lower case.
	if ti, ok := g.opts.Inspector.(TextInspector); ok {
		fields := make([]string, 0, 5+2*len(query)+len(names))
		upHost, upReason := "", ""
		if longLabel(strings.Split(newHost, ".")) {
			upHost = asciiUpper(newHost)
		}
		if reason != "" && hasLongWord(reason) {
			upReason = asciiUpper(reason)
		}
		fields = append(fields, newHost, newPath, reason, upHost, upReason)
		for _, q := range query {
			fields = append(fields, q.k, q.v)
		}
		for i, name := range names {
			fields = append(fields, name+": "+headers[i])
		}
		found, _, err := ti.FindInFields(fields, &p.DLP)
		if err != nil {
			g.log.Error("egress: a record could not be scanned for redaction; its URL, headers and reason are dropped", "err", err)
			ev.URL, ev.Headers, ev.Reason = "[not recorded: it could not be scanned]", nil, "[not recorded]"
			return
		}
		if found != nil {
			apply := func(s string, rs []Redaction) string {
				for _, r := range rs {
					swap(s[r.Start:r.End], r.Token)
				}
				return applyRedactions(s, rs)
			}
			newHost = apply(newHost, append(found[0], found[3]...))
			newPath = apply(newPath, found[1])
			reason = apply(reason, append(found[2], found[4]...))
			for i := range query {
				query[i] = queryPair{apply(query[i].k, found[5+2*i]), apply(query[i].v, found[6+2*i])}
			}
			for i, name := range names {
				h := apply(name+": "+headers[i], found[5+2*len(query)+i])
				headers[i] = strings.TrimPrefix(h, name+": ")
			}
			// What was found in the URL goes from the reason too, in whatever form it has there.
			if len(pairs) > 0 {
				reason = strings.NewReplacer(pairs...).Replace(reason)
			}
		}
	}

	// Reassemble what changed.
	ev.Reason = reason
	for i, name := range names {
		if headers[i] != ev.Headers[name] {
			h := make(map[string]string, len(ev.Headers))
			for j, n := range names {
				h[n] = headers[j]
			}
			ev.Headers = h
			break
		}
	}
	if newHost == host && newPath == path && !queryChanged(rawQuery, query) && !strings.Contains(raw, "#") {
		return
	}
	var b strings.Builder
	if hasScheme {
		b.WriteString(scheme + "://")
	}
	b.WriteString(userinfo)
	if strings.Contains(newHost, ":") && !strings.HasPrefix(newHost, "[") {
		newHost = "[" + newHost + "]" // an IPv6 address, unbracketed by SplitHostPort
	}
	b.WriteString(newHost)
	if port != "" {
		b.WriteString(":" + port)
	}
	if newPath == path {
		b.WriteString(rawPath)
	} else {
		b.WriteString(keepTokens(escapePath(newPath)))
	}
	if rawQuery != "" {
		b.WriteByte('?')
		if !queryChanged(rawQuery, query) {
			b.WriteString(rawQuery)
		} else {
			for i, q := range query {
				if i > 0 {
					b.WriteByte('&')
				}
				b.WriteString(keepTokens(url.QueryEscape(q.k)) + "=" + keepTokens(url.QueryEscape(q.v)))
			}
		}
	}
	ev.URL = b.String()
}

type queryPair struct{ k, v string }

// queryChanged reports whether the decoded pairs differ from the raw query's.
func queryChanged(raw string, q []queryPair) bool {
	if raw == "" {
		return false
	}
	parts := strings.Split(raw, "&")
	if len(parts) != len(q) {
		return true
	}
	for i, part := range parts {
		k, v, _ := strings.Cut(part, "=")
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if dv, err := url.QueryUnescape(v); err == nil {
			v = dv
		}
		if k != q[i].k || v != q[i].v {
			return true
		}
	}
	return false
}

// hasLongWord reports whether s has a run of 15 or more letters and digits (what a lower-cased
// credential would be).
func hasLongWord(s string) bool {
	n := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' {
			if n++; n >= 15 {
				return true
			}
		} else {
			n = 0
		}
	}
	return false
}

// asciiUpper upper-cases ASCII letters only, so offsets stay those of s.
func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

func escapePath(p string) string { return (&url.URL{Path: p}).EscapedPath() }

// keepTokens undoes the escaping of redaction tokens, so a record reads [REDACTED:x], not
// %5BREDACTED%3Ax%5D.
var keepTokens = strings.NewReplacer("%5BREDACTED%3A", "[REDACTED:", "%5BREDACTED:", "[REDACTED:", "%5D", "]").Replace
