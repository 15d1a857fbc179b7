package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// replayLimit is the largest body the gateway keeps to send a second time (to another node,
// or to a session's new owner). Larger bodies are streamed through once.
const replayLimit = 1 << 20

// body is a request's body, kept when small enough to send again.
type body struct {
	buf    []byte    // the whole body, when kept
	stream io.Reader // otherwise: what was read, then the rest
}

// readBody keeps r's body when it is at most replayLimit.
func readBody(r *http.Request) (*body, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return &body{buf: []byte{}}, nil
	}
	if r.ContentLength > replayLimit {
		return &body{stream: r.Body}, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, replayLimit+1))
	if err != nil {
		return nil, sandbox.Errorf(sandbox.KindInvalidRequest, "reading the request body: %v", err)
	}
	if len(b) > replayLimit {
		return &body{stream: io.MultiReader(bytes.NewReader(b), r.Body)}, nil
	}
	return &body{buf: b}, nil
}

// replayable says whether the body can be sent again.
func (b *body) replayable() bool { return b.buf != nil }

func (b *body) reader() (io.Reader, int64) {
	if b.buf != nil {
		return bytes.NewReader(b.buf), int64(len(b.buf))
	}
	s := b.stream
	b.stream = nil // once
	return s, -1
}

// hopHeaders are a connection's own headers, not forwarded (RFC 9110 7.6.1).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// outRequest builds the request to a node: the client's method, path, query and headers (its
// Authorization included), and the body.
func outRequest(ctx context.Context, r *http.Request, addr, path string, b *body) (*http.Request, error) {
	var rd io.Reader
	n := int64(0)
	if b != nil {
		rd, n = b.reader()
	}
	u := addr + path
	if r.URL.RawQuery != "" {
		u += "?" + r.URL.RawQuery
	}
	out, err := http.NewRequestWithContext(ctx, r.Method, u, rd)
	if err != nil {
		return nil, err
	}
	out.ContentLength = n
	if n == 0 {
		out.Body = http.NoBody
	}
	if a, ok := e2bOf(ctx); ok {
		out.Host = a.host // the node's E2B front door answers its names
	}
	for k, vs := range r.Header {
		out.Header[k] = vs
	}
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := r.Header.Get("X-Forwarded-For"); prior != "" {
			ip = prior + ", " + ip
		}
		out.Header.Set("X-Forwarded-For", ip)
	}
	return out, nil
}

// send sends r (with body b) to n and returns the node's answer. notSent reports an error that
// happened before the node could have read the request (a refused or failed dial), after which
// sending it elsewhere is safe.
func (g *Gateway) send(r *http.Request, n *node, path string, b *body) (resp *http.Response, notSent bool, err error) {
	out, err := outRequest(r.Context(), r, n.Addr, path, b)
	if err != nil {
		return nil, false, err
	}
	n.inflight.Add(1)
	resp, err = g.tr.RoundTrip(out)
	if err != nil {
		n.inflight.Add(-1)
		// A refused dial; or a kept-alive connection the node's process left (reset, or closed
		// before any answer) to a node that now refuses new connections: it is gone and never
		// ran the request.
		if isDialError(err) || isConnLost(err) && r.Context().Err() == nil && g.gone(r.Context(), n) {
			n.down.Store(true) // until the next poll reaches it
			return nil, true, err
		}
		return nil, false, err
	}
	resp.Body = &doneBody{ReadCloser: resp.Body, n: n}
	return resp, false, nil
}

// doneBody ends the node's in-flight count when the answer has been read.
type doneBody struct {
	io.ReadCloser
	n    *node
	done bool
}

func (d *doneBody) Close() error {
	if !d.done {
		d.done = true
		d.n.inflight.Add(-1)
	}
	return d.ReadCloser.Close()
}

// isDialError says whether err happened while connecting: the request was not sent.
func isDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// isConnLost says whether err is a connection that ended before the node answered.
func isConnLost(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// gone says whether n no longer answers: GET /v1/health (which needs no key and touches no
// sandbox) fails or does not answer 200 within a second. A node that reset a connection as its
// process ended may still accept one for a moment, so this asks for an answer, not a connection.
func (g *Gateway) gone(ctx context.Context, n *node) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.Addr+"/v1/health", nil)
	if err != nil {
		return false
	}
	resp, err := g.tr.RoundTrip(req)
	if err != nil {
		return ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded)
	}
	resp.Body.Close()
	return resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable
}

// unreachable is the error for a node that could not be reached.
func unreachable(n *node, err error) error {
	if errors.Is(err, context.Canceled) {
		return sandbox.Errorf(sandbox.KindTimeout, "the request was cancelled while node %s answered", n.ID)
	}
	return sandbox.Errorf(sandbox.KindRuntimeUnavailable, "node %s did not answer: %v", n.ID, err).
		WithHint("retry; a one-shot run or a new session goes to another node")
}

// NodeHeader names, in the gateway's answers, the node that answered (for debugging, tests and
// benchmarks; the session id already names it for sessions).
const NodeHeader = "Agentbox-Node"

// relay writes a node's answer to the client: status, headers, then the body, flushed after
// every chunk when it is a stream (or of unknown length), so events reach the client as the
// node sends them.
func relay(w http.ResponseWriter, resp *http.Response) {
	defer resp.Body.Close()
	h := w.Header()
	for k, vs := range resp.Header {
		h[k] = vs
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
	if d, ok := resp.Body.(*doneBody); ok {
		h.Set(NodeHeader, d.n.ID)
	}
	w.WriteHeader(resp.StatusCode)
	if !isStream(resp) {
		buf := make([]byte, 32<<10)
		_, _ = io.CopyBuffer(w, resp.Body, buf)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

// isStream says whether an answer is streamed: events, NDJSON, or a body of unknown length.
func isStream(resp *http.Response) bool {
	ct := resp.Header.Get("Content-Type")
	return strings.HasPrefix(ct, "text/event-stream") || strings.HasPrefix(ct, "application/x-ndjson") || resp.ContentLength < 0
}

// placed sends a request that may go to any node (a one-shot run, a new session) to the first
// node placement picks, and to the next once when that one refuses the connection.
func (g *Gateway) placed(w http.ResponseWriter, r *http.Request) {
	b, err := readBody(r)
	if err != nil {
		fail(w, err)
		return
	}
	g.placedWith(w, r, b)
}

// placedWith is placed with the body already read.
func (g *Gateway) placedWith(w http.ResponseWriter, r *http.Request, b *body) {
	wt := wantOf(b)
	wt.session = r.URL.Path == "/v1/sessions"
	g.placedWant(w, r, b, wt)
}

// placedWant is placedWith for what wt asks.
func (g *Gateway) placedWant(w http.ResponseWriter, r *http.Request, b *body, wt want) {
	start := time.Now()
	order, err := g.place(wt)
	g.metrics.placement.Observe(time.Since(start).Seconds())
	if err != nil {
		fail(w, err)
		return
	}
	for i, n := range order {
		resp, notSent, err := g.send(r, n, r.URL.Path, b)
		if err == nil {
			if wt.session && resp.StatusCode/100 == 2 {
				n.opened.Add(1)
			}
			relay(w, resp)
			return
		}
		if !notSent || i == 1 || !b.replayable() || i+1 == len(order) {
			fail(w, unreachable(n, err))
			return
		}
		g.log.Warn("node refused a placed request; trying the next", "node", n.ID, "err", err)
	}
}

// anyNode sends a request any node answers alike (images, keys, a node's typed 404) to the
// first placed node, and to the next once when it refuses the connection.
func (g *Gateway) anyNode(w http.ResponseWriter, r *http.Request) { g.placed(w, r) }

// wantOf reads what a run or session asks for from its JSON body: its runtime and image.
// A body it cannot read asks for nothing in particular.
func wantOf(b *body) want {
	if !b.replayable() || len(b.buf) == 0 {
		return want{}
	}
	var req struct {
		Runtime string `json:"runtime"`
		Image   string `json:"image"`
	}
	if json.Unmarshal(b.buf, &req) != nil || req.Runtime == "auto" {
		return want{image: req.Image}
	}
	return want{tier: req.Runtime, image: req.Image}
}

// console forwards the web console: a session's pages (/ui/sessions/{id}/...) to the node the id
// names, an artifact (/ui/artifacts/{id}, a figure on a step's page) to the node that has it,
// everything else (the login, the lists, the audit page) to the stable node. The nodes share
// their console logins (webui.Options.SharedLogins), so one login serves them all.
func (g *Gateway) console(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/ui/sessions/")
	if id, _, _ := strings.Cut(rest, "/"); ok && id != "" {
		if owner, named := cluster.NodeOfSession(id); named {
			n := g.byID(owner)
			if n == nil || !n.healthy() {
				// Its node is gone: the node that adopted it, if one has (a console request
				// names no caller the gateway knows, so it moves nothing itself).
				n = g.ownerNow(r, id, owner)
			}
			if n != nil {
				resp, _, err := g.send(r, n, r.URL.Path, &body{stream: r.Body})
				if err != nil {
					fail(w, unreachable(n, err))
					return
				}
				if resp.StatusCode == http.StatusNotFound && r.Method == http.MethodGet {
					// Up, but the session moved away while it was gone: follow it.
					if to := g.ownerNow(r, id, n.ID); to != nil {
						resp.Body.Close()
						if resp, _, err = g.send(r, to, r.URL.Path, &body{buf: []byte{}}); err != nil {
							fail(w, unreachable(to, err))
							return
						}
					}
				}
				relay(w, resp)
				return
			}
		}
	}
	if strings.HasPrefix(r.URL.Path, "/ui/artifacts/") && r.Method == http.MethodGet {
		ans, err := g.fanOut(r, r.URL.Path, &body{buf: []byte{}}, 256<<20)
		if err != nil {
			fail(w, err)
			return
		}
		for i := range ans {
			if a := &ans[i]; a.err == nil && a.status/100 == 2 {
				writeRaw(w, a)
				return
			}
		}
	}
	g.stable(w, r)
}

// stable sends a request to the first healthy node in discovery's order, the same node every
// time while it is healthy: the web console keeps its logins in the memory of the node that
// served the login.
func (g *Gateway) stable(w http.ResponseWriter, r *http.Request) {
	for _, n := range g.snapshot() {
		if !n.healthy() {
			continue
		}
		resp, _, err := g.send(r, n, r.URL.Path, &body{stream: r.Body})
		if err != nil {
			fail(w, unreachable(n, err))
			return
		}
		relay(w, resp)
		return
	}
	fail(w, noNode(g.snapshot()))
}

// ownerNow asks a healthy node (GET /v1/node/owner, with the cluster token) which node owns
// session id now, by the shared store, and returns it when it is another healthy node than not;
// nil otherwise. Nothing moves.
func (g *Gateway) ownerNow(r *http.Request, id, not string) *node {
	for _, n := range g.snapshot() {
		if !n.healthy() || n.ID == not {
			continue
		}
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, n.Addr+"/v1/node/owner?session="+url.QueryEscape(id), nil)
		if err != nil {
			return nil
		}
		if g.opts.Token != "" {
			req.Header.Set("Authorization", "Bearer "+g.opts.Token)
		}
		resp, err := g.tr.RoundTrip(req)
		if err != nil {
			continue
		}
		var ans AdoptAnswer
		ok := resp.StatusCode == http.StatusOK && json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&ans) == nil
		resp.Body.Close()
		if !ok {
			return nil // not found, or not answered: the same from every node
		}
		if to := g.byID(ans.Owner); to != nil && to.healthy() && to.ID != not {
			return to
		}
		return nil
	}
	return nil
}
