package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The E2B front door through the gateway. E2B's SDKs address the control plane at
// api.<domain> and a service inside a sandbox at <port>-<sandbox id>.<domain> (or, with one
// address for everything, any name plus the headers E2b-Sandbox-Id and E2b-Sandbox-Port). The
// nodes serve those names (their --e2b-domain, the same as the gateway's); the gateway forwards
// such a request with its E2B host name, so the node's E2B door answers it:
//
//   - a sandbox's services, and control-plane calls on one sandbox (/sandboxes/{id}...): the node
//     the sandbox id names (it is the session id without its underscore, which names the node),
//     moved like any session when that node is gone, for the caller the sandbox belongs to (the
//     access token's key, checked here as on the nodes: auth.SandboxTokens);
//   - create (POST /v2/sandboxes): placed as a new session is;
//   - list (GET /v2/sandboxes, /sandboxes): every node's, merged in the list's order, a page of
//     the asked size with a cursor every node reads (internal/e2b lists after a cursor by order);
//   - anything else on the control plane: any node (they answer alike, not_implemented included).
//
// Errors the gateway answers itself are in E2B's format ({"code", "message"}), as the nodes'.

// E2BOptions let the gateway forward E2B's SDKs (internal/e2b behind it, on every node).
type E2BOptions struct {
	// Domain is the SDKs' E2B_DOMAIN: the nodes' --e2b-domain. Empty: no E2B names here.
	Domain string
	// TokenSecret checks sandboxes' access tokens: auth.SandboxTokenSecret of the nodes' key.
	TokenSecret []byte
}

// The headers the SDKs send with every in-sandbox request.
const (
	e2bSandboxHeader = "E2b-Sandbox-Id"
	e2bPortHeader    = "E2b-Sandbox-Port"
	e2bEnvdPort      = 49983
)

// e2bAddr is what an E2B request is for, and the host name the nodes know it by.
type e2bAddr struct {
	control   bool
	sandboxID string
	port      int
	host      string
}

type e2bKey struct{}

// e2bOf is the E2B address a request's context carries, if it is an E2B request.
func e2bOf(ctx context.Context) (e2bAddr, bool) {
	a, ok := ctx.Value(e2bKey{}).(e2bAddr)
	return a, ok
}

// e2bAddress finds whether r is for E2B's SDKs and what for: a host name under the domain, or
// the SDKs' sandbox headers (one address for everything).
func (g *Gateway) e2bAddress(r *http.Request) (e2bAddr, bool) {
	d := g.e2bDomain
	if d == "" {
		return e2bAddr{}, false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if label, ok := strings.CutSuffix(host, "."+d); ok && label != "" && !strings.Contains(label, ".") {
		if label == "api" {
			return e2bAddr{control: true, host: host}, true
		}
		p, id, _ := strings.Cut(label, "-")
		port, err := strconv.Atoi(p)
		if err != nil || id == "" {
			return e2bAddr{sandboxID: label, host: host}, true // not found on any node
		}
		return e2bAddr{sandboxID: id, port: port, host: host}, true
	}
	if id := r.Header.Get(e2bSandboxHeader); id != "" {
		port, err := strconv.Atoi(r.Header.Get(e2bPortHeader))
		if err != nil {
			port = e2bEnvdPort
		}
		return e2bAddr{sandboxID: id, port: port, host: strconv.Itoa(port) + "-" + strings.ToLower(id) + "." + d}, true
	}
	return e2bAddr{}, false
}

// E2BHandler is the gateway's own E2B listener (serve --role gateway --e2b-listen), as a node's
// --e2b-listen: every request there is E2B's. A sandbox's services are found by host name or by
// the SDKs' sandbox headers (E2B_SANDBOX_URL pointed here), and whatever else arrives is the
// control plane (E2B_API_URL pointed here), whatever its host name. Nil when the gateway has no
// E2B domain: the nodes know E2B requests by their domain's names, which the gateway forwards.
func (g *Gateway) E2BHandler() http.Handler {
	if g.e2bDomain == "" {
		return nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &apiwire.StatusWriter{ResponseWriter: w}
		defer func() { g.metrics.observe(r, sw.Status, time.Since(start)) }()
		a, ok := g.e2bAddress(r)
		if !ok {
			a = e2bAddr{control: true, host: "api." + g.e2bDomain}
		}
		g.e2b(sw, r, a)
	})
}

// e2bWriter marks an answer to an E2B request: fail writes E2B's error format to it.
type e2bWriter struct{ http.ResponseWriter }

func (w *e2bWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// e2bError is err in E2B's error format, as internal/e2b/e2bwire writes it.
func e2bError(w http.ResponseWriter, err error) {
	e := sandbox.AsError(err)
	msg := e.Error()
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	if e.Kind == sandbox.KindInternal {
		msg = "internal error: the gateway's log has the details"
	}
	status := apiwire.StatusOf(e.Kind)
	writeJSON(w, status, struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{status, msg})
}

// sandboxSession is the session id of an E2B sandbox id ("sbn1-0f3a" is "sb_n1-0f3a"), and
// whether it names a node of a cluster.
func sandboxSession(sandboxID string) (string, bool) {
	rest, ok := strings.CutPrefix(sandboxID, "sb")
	if !ok || rest == "" {
		return "", false
	}
	id := "sb_" + rest
	_, ok = cluster.NodeOfSession(id)
	return id, ok
}

// e2b forwards an E2B request (a is what for).
func (g *Gateway) e2b(w http.ResponseWriter, r *http.Request, a e2bAddr) {
	w = &e2bWriter{w}
	r = r.WithContext(context.WithValue(r.Context(), e2bKey{}, a))
	if a.control {
		g.e2bControl(w, r)
		return
	}
	sid, ok := sandboxSession(a.sandboxID)
	if !ok {
		e2bGone(w, a.sandboxID)
		return
	}
	id, known, err := g.e2bServiceIdentity(r, sid)
	if err != nil {
		fail(w, err)
		return
	}
	if known {
		r = r.WithContext(withIdentity(r.Context(), id))
	}
	g.session(w, r, sid)
}

// e2bGone answers as E2B's edge (and a node's E2B door) does for a sandbox that is not running.
func e2bGone(w http.ResponseWriter, sandboxID string) {
	q, _ := json.Marshal(sandboxID)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadGateway)
	_, _ = w.Write([]byte(`{"code":502,"message":"sandbox ` + strings.Trim(string(q), `"`) + ` not found","sandboxId":` + string(q) + `}`))
}

// e2bControl forwards a control-plane call.
func (g *Gateway) e2bControl(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimSuffix(r.URL.Path, "/")
	if r.Method == http.MethodGet && p == "/health" {
		writeJSON(w, http.StatusOK, map[string]string{"message": "ok"})
		return
	}
	id, err := g.e2bKeyIdentity(r)
	if err != nil {
		fail(w, err)
		return
	}
	r = r.WithContext(withIdentity(r.Context(), id))
	switch {
	case r.Method == http.MethodPost && (p == "/v2/sandboxes" || p == "/sandboxes"):
		b, err := readBody(r)
		if err != nil {
			fail(w, err)
			return
		}
		g.placedWant(w, r, b, want{session: true})
	case r.Method == http.MethodGet && p == "/v2/sandboxes":
		g.e2bList(w, r, 100)
	case r.Method == http.MethodGet && p == "/sandboxes":
		g.e2bList(w, r, 0)
	default:
		if sid, ok := sandboxSession(sandboxOfPath(p)); ok {
			g.session(w, r, sid)
			return
		}
		g.anyNode(w, r)
	}
}

// sandboxOfPath is the {sandboxID} of /sandboxes/{sandboxID}... and /v2/sandboxes/{sandboxID}/...
func sandboxOfPath(p string) string {
	rest, ok := strings.CutPrefix(p, "/v2/sandboxes/")
	if !ok {
		rest, ok = strings.CutPrefix(p, "/sandboxes/")
	}
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}

// e2bKeyIdentity authenticates a control-plane call: the SDK's X-API-Key, or a Bearer key.
func (g *Gateway) e2bKeyIdentity(r *http.Request) (auth.Identity, error) {
	key := auth.RequestKey(r)
	if key == "" {
		return auth.Identity{}, sandbox.Errorf(sandbox.KindUnauthorized, "this E2B call needs an API key").
			WithHint("set E2B_API_KEY to an agentbox key of this cluster")
	}
	return g.opts.Keys.Authenticate(key, time.Now())
}

// e2bServiceIdentity is who makes an in-sandbox request: the key its access token was issued to,
// or the API key it carries. A signed file URL (a signature the node checks against the
// sandbox's record) is forwarded without one known here: known is false, and such a request
// does not move a sandbox.
func (g *Gateway) e2bServiceIdentity(r *http.Request, sessionID string) (id auth.Identity, known bool, err error) {
	for _, h := range []string{"X-Access-Token", "E2B-Traffic-Access-Token"} {
		if tok := r.Header.Get(h); tok != "" {
			keyID, ok := g.e2bTokens.Check(sessionID, tok)
			if !ok {
				return id, false, sandbox.Errorf(sandbox.KindUnauthorized, "the sandbox's access token (%s) is not valid for this sandbox", h).
					WithHint("use the sandbox object Sandbox.create or Sandbox.connect returned")
			}
			id, err = g.opts.Keys.IdentityOfKey(keyID, time.Now())
			return id, err == nil, err
		}
	}
	if r.Header.Get("X-API-Key") != "" || r.Header.Get("Authorization") != "" {
		id, err = g.e2bKeyIdentity(r)
		return id, err == nil, err
	}
	if r.URL.Query().Get("signature") != "" && r.URL.Path == "/files" {
		return id, false, nil
	}
	return id, false, sandbox.Errorf(sandbox.KindUnauthorized, "a request to a sandbox needs its access token").
		WithHint("the SDKs send it (X-Access-Token) from the sandbox Sandbox.create or Sandbox.connect returned")
}

// e2bList merges every node's Sandbox.list: the caller's sandboxes on all of them, in the
// list's order (by start, newest first unless order=asc, then by id), a page of at most limit
// (the query's, default and at most pageMax; pageMax 0 is the SDK v1's list, unpaged) with the
// next page's cursor in X-Next-Token and the running count over every node in X-Total-Running.
func (g *Gateway) e2bList(w http.ResponseWriter, r *http.Request, pageMax int) {
	ans, err := g.fanOut(r, r.URL.Path, &body{buf: []byte{}}, 64<<20)
	if err != nil {
		fail(w, err)
		return
	}
	type item struct {
		raw    json.RawMessage
		cursor string
	}
	var all []item
	running, more := 0, false
	for i := range ans {
		a := &ans[i]
		if a.err != nil {
			fail(w, unreachable(a.n, a.err))
			return
		}
		if a.status != http.StatusOK {
			writeRaw(w, a)
			return
		}
		var list []json.RawMessage
		if err := json.Unmarshal(a.body, &list); err != nil {
			fail(w, sandbox.Errorf(sandbox.KindInternal, "node %s: a sandbox list that does not parse: %v", a.n.ID, err))
			return
		}
		for _, raw := range list {
			var s struct {
				SandboxID string `json:"sandboxID"`
				StartedAt string `json:"startedAt"`
			}
			_ = json.Unmarshal(raw, &s)
			all = append(all, item{raw: raw, cursor: s.StartedAt + " " + s.SandboxID})
		}
		n, _ := strconv.Atoi(a.header.Get("X-Total-Running"))
		running += n
		more = more || a.header.Get("X-Next-Token") != ""
	}
	asc := r.URL.Query().Get("order") == "asc"
	sort.SliceStable(all, func(i, j int) bool { return all[i].cursor < all[j].cursor == asc })
	if pageMax > 0 {
		limit := pageMax
		if n, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && n > 0 {
			limit = min(n, pageMax)
		}
		if len(all) > limit {
			all, more = all[:limit], true
		}
		if more && len(all) > 0 {
			w.Header().Set("X-Next-Token", base64.RawURLEncoding.EncodeToString([]byte(all[len(all)-1].cursor)))
		}
	}
	out := make([]json.RawMessage, len(all))
	for i, it := range all {
		out[i] = it.raw
	}
	w.Header().Set("X-Total-Running", strconv.Itoa(running))
	writeJSON(w, http.StatusOK, out)
}
