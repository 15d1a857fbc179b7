package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// answer is one node's answer to a request sent to every node.
type answer struct {
	n      *node
	status int
	header http.Header
	body   []byte
	err    error
}

// fanOut sends r (with body b, which must be kept) to every healthy node at once and collects
// their answers, each body bounded by limit bytes. An error, when no node is healthy.
func (g *Gateway) fanOut(r *http.Request, path string, b *body, limit int64) ([]answer, error) {
	var ok []*node
	for _, n := range g.snapshot() {
		if n.healthy() {
			ok = append(ok, n)
		}
	}
	if len(ok) == 0 {
		return nil, noNode(g.snapshot())
	}
	// The answers are read and merged here, not passed on: the client's Accept-Encoding would
	// get them compressed (promhttp gzips /metrics) past the transport, which decompresses only
	// what it asked for itself.
	if r.Header.Get("Accept-Encoding") != "" {
		r = r.Clone(r.Context())
		r.Header.Del("Accept-Encoding")
	}
	out := make([]answer, len(ok))
	var wg sync.WaitGroup
	for i, n := range ok {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := answer{n: n}
			resp, _, err := g.send(r, n, path, &body{buf: b.buf})
			if err != nil {
				a.err = err
			} else {
				a.status, a.header = resp.StatusCode, resp.Header
				a.body, a.err = io.ReadAll(io.LimitReader(resp.Body, limit))
				resp.Body.Close()
			}
			out[i] = a
		}()
	}
	wg.Wait()
	return out, nil
}

// firstOK answers with the first 2xx answer of ans, else the first refusal other than
// not_found (a node that does not have the thing), else a not_found.
func firstOK(w http.ResponseWriter, ans []answer, notFound error) {
	var refusal *answer
	for i := range ans {
		a := &ans[i]
		switch {
		case a.err != nil:
			continue
		case a.status >= 200 && a.status < 300:
			writeRaw(w, a)
			return
		case a.status != http.StatusNotFound && refusal == nil:
			refusal = a
		}
	}
	if refusal != nil {
		writeRaw(w, refusal)
		return
	}
	for _, a := range ans {
		if a.err != nil {
			fail(w, unreachable(a.n, a.err))
			return
		}
	}
	fail(w, notFound)
}

func writeRaw(w http.ResponseWriter, a *answer) {
	for k, vs := range a.header {
		w.Header()[k] = vs
	}
	for _, k := range hopHeaders {
		w.Header().Del(k)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// firstFound answers a read of something one node has (an artifact) with the answer of the node
// that has it.
func (g *Gateway) firstFound(w http.ResponseWriter, r *http.Request) {
	ans, err := g.fanOut(r, r.URL.Path, &body{buf: []byte{}}, 256<<20)
	if err != nil {
		fail(w, err)
		return
	}
	firstOK(w, ans, sandbox.Errorf(sandbox.KindNotFound, "%s: no node has it", r.URL.Path).
		WithHint("artifacts expire (artifacts_ttl); run the code again to make it anew"))
}

// everyNode sends a change every node must see (egress reload, the hosted MCP registry) to
// all of them; it answers with the first node's answer when all agree, else with the first
// refusal, naming the nodes that did not take it.
func (g *Gateway) everyNode(w http.ResponseWriter, r *http.Request) {
	b, err := readBody(r)
	if err != nil {
		fail(w, err)
		return
	}
	if !b.replayable() {
		fail(w, sandbox.Errorf(sandbox.KindInvalidRequest, "a change sent to every node must be at most %d bytes", replayLimit))
		return
	}
	ans, err := g.fanOut(r, r.URL.Path, b, 16<<20)
	if err != nil {
		fail(w, err)
		return
	}
	var bad []string
	for _, a := range ans {
		if a.err != nil {
			bad = append(bad, a.n.ID+": "+a.err.Error())
		} else if a.status >= 300 {
			bad = append(bad, fmt.Sprintf("%s: HTTP %d", a.n.ID, a.status))
		}
	}
	if len(bad) > 0 {
		for i := range ans {
			if a := &ans[i]; a.err == nil && a.status >= 300 {
				writeRaw(w, a)
				return
			}
		}
		fail(w, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "not every node took the change: %v", bad).
			WithHint("repeat the request: it is idempotent on the nodes that took it"))
		return
	}
	writeRaw(w, &ans[0])
}

// listSessions merges GET /v1/sessions of every node (each answers only what the caller may
// see), oldest first.
func (g *Gateway) listSessions(w http.ResponseWriter, r *http.Request) {
	ans, err := g.fanOut(r, r.URL.Path, &body{buf: []byte{}}, 64<<20)
	if err != nil {
		fail(w, err)
		return
	}
	lists, ok := listsOf(w, ans, "sessions", "a session list that does not parse")
	if !ok {
		return
	}
	var all []json.RawMessage
	type created struct {
		CreatedAt time.Time `json:"created_at"`
	}
	for _, list := range lists {
		all = append(all, list...)
	}
	times := make([]time.Time, len(all))
	for i, s := range all {
		var c created
		_ = json.Unmarshal(s, &c)
		times[i] = c.CreatedAt
	}
	idx := make([]int, len(all))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return times[idx[a]].Before(times[idx[b]]) })
	out := make([]json.RawMessage, len(all))
	for i, j := range idx {
		out[i] = all[j]
	}
	writeJSON(w, http.StatusOK, struct {
		Sessions []json.RawMessage `json:"sessions"`
	}{Sessions: out})
}

// listsOf reads the JSON list in member ("sessions") of every node's answer, in ans's order.
// When a node did not answer, refused, or sent what does not parse, it answers the client
// itself (what says what did not parse) and returns false.
func listsOf(w http.ResponseWriter, ans []answer, member, what string) ([][]json.RawMessage, bool) {
	out := make([][]json.RawMessage, len(ans))
	for i := range ans {
		a := &ans[i]
		if a.err != nil {
			fail(w, unreachable(a.n, a.err))
			return nil, false
		}
		if a.status != http.StatusOK {
			writeRaw(w, a)
			return nil, false
		}
		var obj map[string]json.RawMessage
		err := json.Unmarshal(a.body, &obj)
		if raw, ok := obj[member]; err == nil && ok {
			err = json.Unmarshal(raw, &out[i])
		}
		if err != nil {
			fail(w, sandbox.Errorf(sandbox.KindInternal, "node %s: %s: %v", a.n.ID, what, err))
			return nil, false
		}
	}
	return out, true
}

// withNode adds "node":ID to a JSON object, as its first member.
func withNode(obj json.RawMessage, id string) json.RawMessage {
	obj = bytes.TrimSpace(obj)
	if len(obj) < 2 || obj[0] != '{' {
		return obj
	}
	var b bytes.Buffer
	b.Grow(len(obj) + len(id) + 12)
	b.WriteString(`{"node":`)
	q, _ := json.Marshal(id)
	b.Write(q)
	if rest := bytes.TrimSpace(obj[1:]); len(rest) > 0 && rest[0] != '}' {
		b.WriteByte(',')
	}
	b.Write(obj[1:])
	return b.Bytes()
}
