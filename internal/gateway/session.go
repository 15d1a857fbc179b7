package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// AdoptAnswer is POST /v1/node/adopt's answer (the node side is internal/nodeapi's; the body is
// cluster.AdoptRequest).
// It names the node that owns the session now.
type AdoptAnswer struct {
	Owner   string `json:"owner"`
	Addr    string `json:"addr"`
	Adopted bool   `json:"adopted"`
	Step    string `json:"step"`
}

// session forwards a request under /v1/sessions/{id} to the node the id names. When that node
// is gone from discovery, unhealthy, draining, or refuses the connection, a healthy node adopts
// the session (POST /v1/node/adopt) and the request goes to the owner it names.
func (g *Gateway) session(w http.ResponseWriter, r *http.Request, id string) {
	owner, ok := cluster.NodeOfSession(id)
	if !ok {
		fail(w, sandbox.Errorf(sandbox.KindNotFound, "session %q is not a session of this cluster", id).
			WithHint("a cluster's session ids name their node (sb_<node>-<hex>); create one with POST /v1/sessions"))
		return
	}
	b, err := readBody(r)
	if err != nil {
		fail(w, err)
		return
	}
	g.routeSession(w, r, id, owner, b)
}

// sessionWith forwards a request about session id (a tool call that names it) with its body
// already read.
func (g *Gateway) sessionWith(w http.ResponseWriter, r *http.Request, id string, b *body) {
	owner, _ := cluster.NodeOfSession(id)
	g.routeSession(w, r, id, owner, b)
}

// routeSession sends the request to the session's owner, or to the node that adopts it.
func (g *Gateway) routeSession(w http.ResponseWriter, r *http.Request, id, owner string, b *body) {
	n := g.byID(owner)
	if n != nil && n.healthy() {
		resp, notSent, err := g.send(r, n, r.URL.Path, b)
		if err == nil && notHere(r, resp) && b.replayable() {
			g.movedAway(w, r, id, n, resp, b)
			return
		}
		if err == nil {
			relay(w, resp)
			return
		}
		if !notSent || !b.replayable() {
			fail(w, unreachable(n, err))
			return
		}
		g.log.Warn("a session's node refused the connection; asking another to adopt it", "session", id, "node", owner, "err", err)
	}
	to, err := g.adopt(r, id, owner)
	if err != nil {
		fail(w, err)
		return
	}
	resp, _, err := g.send(r, to, r.URL.Path, b)
	if err != nil {
		fail(w, unreachable(to, err))
		return
	}
	relay(w, resp)
}

// notHere says whether a node's answer says it does not hold the session: the API's 404, or the
// 502 of an E2B sandbox that is not running (which a sandbox on another node is, to it).
func notHere(r *http.Request, resp *http.Response) bool {
	if resp.StatusCode == http.StatusNotFound {
		return true
	}
	a, ok := e2bOf(r.Context())
	return ok && !a.control && resp.StatusCode == http.StatusBadGateway
}

// adopt asks healthy nodes, in placement order, to take over session id from node from; the
// first that answers names the owner. A node's refusal (the session is unknown, or another
// tenant's) is passed on as it is. A request whose caller the gateway does not know (an E2B
// signed URL) moves nothing.
func (g *Gateway) adopt(r *http.Request, id, from string) (*node, error) {
	if !identityKnown(r.Context()) {
		return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "session %s is on node %s, which cannot be reached", id, from).
			WithHint("use the sandbox with its access token (or connect to it) once: that moves it to another node")
	}
	order, err := g.place(want{})
	if err != nil {
		return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "session %s is on node %s, which cannot be reached, and no node can take it over: %v", id, from, sandbox.AsError(err).Message).
			WithHint("retry shortly: the session resumes from its latest durable step when a node is back")
	}
	// The session's successors first (cluster.Successors): the nodes that fetch its latest
	// snapshot ahead from a shared store kept remotely, so that a move finds it on their disk.
	ids := make([]string, len(order))
	for i, n := range order {
		ids[i] = n.ID
	}
	rank := map[string]int{}
	for i, n := range cluster.Successors(id, ids) {
		rank[n] = i
	}
	slices.SortStableFunc(order, func(a, b *node) int { return rank[a.ID] - rank[b.ID] })
	var lastErr error
	for _, n := range order {
		if n.ID == from {
			continue
		}
		ans, err := g.askAdopt(r, n, id)
		if err != nil {
			if k := sandbox.KindOf(err); k == sandbox.KindNotFound || k == sandbox.KindForbidden {
				return nil, err
			}
			lastErr = err
			continue
		}
		g.metrics.adoptions.WithLabelValues(n.ID).Inc()
		if to := g.byID(ans.Owner); to != nil {
			return to, nil
		}
		if ans.Addr != "" {
			return &node{Node: cluster.Node{ID: ans.Owner, Addr: strings.TrimRight(ans.Addr, "/"), Healthy: true, Source: "adopt"}}, nil
		}
		lastErr = fmt.Errorf("node %s named owner %q, which discovery does not list", n.ID, ans.Owner)
	}
	if lastErr == nil {
		lastErr = fmt.Errorf("no other node is healthy")
	}
	return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "session %s is on node %s, which cannot be reached, and no node took it over: %v", id, from, lastErr).
		WithHint("retry shortly: the session resumes from its latest durable step when a node can take it")
}

// askAdopt is POST /v1/node/adopt on n, with the cluster token, for the client of r: the node
// adopts (and names the owner of) only a session that client may see, so another tenant's
// request for a session whose node is gone is not_found and moves nothing.
func (g *Gateway) askAdopt(r *http.Request, n *node, id string) (AdoptAnswer, error) {
	var ans AdoptAnswer
	c := identityOf(r.Context()).Caller
	body, _ := json.Marshal(cluster.AdoptRequest{Session: id, For: &cluster.AdoptCaller{Tenant: c.Tenant, Admin: c.Admin}})
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, n.Addr+"/v1/node/adopt", bytes.NewReader(body))
	if err != nil {
		return ans, err
	}
	req.Header.Set("Content-Type", "application/json")
	if g.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+g.opts.Token)
	}
	resp, err := g.tr.RoundTrip(req)
	if err != nil {
		return ans, fmt.Errorf("node %s: %w", n.ID, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return ans, fmt.Errorf("node %s: %w", n.ID, err)
	}
	if resp.StatusCode != http.StatusOK {
		return ans, nodeError(n, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &ans); err != nil || ans.Owner == "" {
		return ans, fmt.Errorf("node %s: an adopt answer without an owner: %s", n.ID, b)
	}
	return ans, nil
}

// nodeError turns a node's typed error body back into an error of its kind.
func nodeError(n *node, status int, b []byte) error {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Hint    string `json:"hint"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error.Code == "" {
		return fmt.Errorf("node %s: HTTP %d: %s", n.ID, status, bytes.TrimSpace(b))
	}
	err := sandbox.Errorf(sandbox.Kind(e.Error.Code), "%s", e.Error.Message) // a kind's name is its wire code
	if e.Error.Hint != "" {
		err = err.WithHint("%s", e.Error.Hint)
	}
	return err
}

// movedAway handles a not_found from the node a session id names: the session may have moved
// while that node was away (another node adopted it, and the node, back, no longer holds it).
// The node itself is asked where the session is now (POST /v1/node/adopt answers with its
// owner when that owner is alive); when it names another node, the request goes there (which
// applies the caller's tenant as any node does), else the not_found is the answer.
func (g *Gateway) movedAway(w http.ResponseWriter, r *http.Request, id string, n *node, resp *http.Response, b *body) {
	notFound, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	answer := func() {
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.Header().Del("Content-Length")
		w.Header().Set(NodeHeader, n.ID)
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(notFound)
	}
	if err != nil {
		fail(w, unreachable(n, err))
		return
	}
	if !identityKnown(r.Context()) {
		answer()
		return
	}
	ans, err := g.askAdopt(r, n, id)
	if err != nil || ans.Owner == "" || ans.Owner == n.ID && !ans.Adopted {
		answer()
		return
	}
	// Another node owns it; or this one just took it back (its record was still its own).
	to := g.byID(ans.Owner)
	if to == nil && ans.Addr != "" {
		to = &node{Node: cluster.Node{ID: ans.Owner, Addr: strings.TrimRight(ans.Addr, "/"), Healthy: true, Source: "adopt"}}
	}
	if to == nil {
		answer()
		return
	}
	resp2, _, err := g.send(r, to, r.URL.Path, b)
	if err != nil {
		fail(w, unreachable(to, err))
		return
	}
	relay(w, resp2)
}
