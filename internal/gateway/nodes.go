package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// node is one node as the gateway sees it: what discovery says, what its last GET /v1/node
// said, and the gateway's own count of requests in flight to it.
type node struct {
	cluster.Node
	state    atomic.Pointer[nodeState]
	inflight atomic.Int64
	// opened counts the sessions the gateway opened on the node since the poll under way or the
	// last one began: each holds a sandbox the node's last answer still counted as warm and free,
	// so a burst of new sessions spreads instead of all following one stale answer.
	opened atomic.Int64
	// down is set when a request found the node refusing connections, until the next poll that
	// reaches it.
	down atomic.Bool
}

// nodeState is the outcome of one poll.
type nodeState struct {
	info   cluster.NodeInfo
	err    error
	polled time.Time
}

func (n *node) info() cluster.NodeInfo {
	if s := n.state.Load(); s != nil {
		return s.info
	}
	return cluster.NodeInfo{}
}

// healthy says whether the node takes work: discovery finds it healthy, its last poll answered
// recently, it is not draining, and no request since found it refusing connections.
func (n *node) healthy() bool {
	s := n.state.Load()
	return n.Healthy && s != nil && s.err == nil && !s.info.Draining && !n.down.Load()
}

// why says why a node is not healthy, for error messages.
func (n *node) why() string {
	s := n.state.Load()
	switch {
	case !n.Healthy:
		return n.ID + ": unhealthy in " + n.Source
	case s == nil:
		return n.ID + ": not polled yet"
	case s.err != nil:
		return n.ID + ": " + s.err.Error()
	case s.info.Draining:
		return n.ID + ": draining"
	case n.down.Load():
		return n.ID + ": refused a connection"
	}
	return n.ID + ": healthy"
}

// pollLoop reads every node's capacity each PollInterval until Close.
func (g *Gateway) pollLoop() {
	defer g.wg.Done()
	t := time.NewTicker(g.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
			g.poll(g.ctx)
		}
	}
}

// poll asks discovery for the nodes and each node for its NodeInfo, at once, each bounded by
// the poll interval (at least 300 ms).
func (g *Gateway) poll(ctx context.Context) {
	found, err := g.opts.Discovery.Nodes(ctx)
	if err != nil {
		g.log.Warn("discovery failed; keeping the last nodes", "err", err)
		return
	}
	g.mu.RLock()
	old := g.nodes
	g.mu.RUnlock()
	next := make(map[string]*node, len(found))
	order := make([]*node, 0, len(found))
	for _, f := range found {
		n := old[f.ID]
		if n == nil || n.Node != f {
			nn := &node{Node: f}
			if n != nil && n.Addr == f.Addr {
				nn.state.Store(n.state.Load())
				nn.inflight.Store(n.inflight.Load())
				nn.opened.Store(n.opened.Load())
			}
			n = nn
		}
		next[f.ID] = n
		order = append(order, n)
	}
	timeout := max(g.opts.PollInterval, 300*time.Millisecond)
	var wg sync.WaitGroup
	for _, n := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			opened := n.opened.Load() // the answer counts these
			info, err := g.readInfo(pctx, n)
			if err != nil && pctx.Err() != nil && n.recentlyGood(slowGrace) {
				// Slow, not gone: a node busy restoring moved sessions on a loaded machine may
				// take longer than a poll to answer. It keeps its last good answer for a while
				// (a refused connection still counts at once).
				g.log.Debug("a node's capacity answer is late; keeping its last", "node", n.ID, "err", err)
				return
			}
			n.state.Store(&nodeState{info: info, err: err, polled: time.Now()})
			if err == nil {
				n.opened.Add(-opened)
			}
			if err == nil {
				n.down.Store(false)
			}
		}()
	}
	wg.Wait()
	g.mu.Lock()
	g.nodes, g.order = next, order
	g.mu.Unlock()
	g.metrics.nodes(order)
	g.polls.Add(1)
}

// slowGrace is how long a node whose capacity answers time out keeps its last good answer.
const slowGrace = 5 * time.Second

// recentlyGood says whether n's last capacity answer was good and came within d.
func (n *node) recentlyGood(d time.Duration) bool {
	s := n.state.Load()
	return s != nil && s.err == nil && time.Since(s.polled) < d
}

// readInfo is GET /v1/node on n, with the cluster token.
func (g *Gateway) readInfo(ctx context.Context, n *node) (cluster.NodeInfo, error) {
	var info cluster.NodeInfo
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.Addr+"/v1/node", nil)
	if err != nil {
		return info, err
	}
	if g.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+g.opts.Token)
	}
	resp, err := g.tr.RoundTrip(req)
	if err != nil {
		return info, fmt.Errorf("GET /v1/node: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return info, err
	}
	if resp.StatusCode != http.StatusOK {
		return info, fmt.Errorf("GET /v1/node: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, fmt.Errorf("GET /v1/node: %w", err)
	}
	if info.ID != "" && info.ID != n.ID {
		return info, fmt.Errorf("discovery calls it %s but it says it is %s", n.ID, info.ID)
	}
	return info, nil
}

// snapshot is the nodes as the last poll found them, in discovery's order.
func (g *Gateway) snapshot() []*node {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.order
}

// byID is the node of an id, nil when discovery does not list it.
func (g *Gateway) byID(id string) *node {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.nodes[id]
}

// want is what a request asks of a node: a tier ("" for auto), an image ("" for the default),
// and whether it starts a session.
type want struct {
	tier, image string
	session     bool
}

// warm is how many free warm sandboxes n has for w, less the requests the gateway has in flight
// to it (each may be taking one). A new session counts the sandboxes a tier keeps for sessions
// (warm_sessions) where it says them apart.
func (n *node) warm(w want) int64 {
	tiers := n.info().Tiers
	slots := func(t cluster.TierInfo) map[string]int {
		if w.session && t.WarmSessions != nil {
			return t.WarmSessions
		}
		return t.WarmFree
	}
	sum := func(m map[string]int) (n int) {
		for _, v := range m {
			n += v
		}
		return n
	}
	var free int
	switch t, ok := tiers[w.tier]; {
	case ok && w.image != "":
		free = slots(t)[w.image]
	case ok:
		free = sum(slots(t))
	case w.tier == "":
		for _, t := range tiers {
			free += sum(slots(t))
		}
	}
	return int64(free) - n.inflight.Load() - n.opened.Load()
}

// load is the gateway's requests in flight to the node, plus its open sessions when w starts a
// session (an idle session costs a one-shot run nothing, and a new session adds to the node's
// count of them).
func (n *node) load(w want) int64 {
	l := n.inflight.Load()
	if w.session {
		l += int64(n.info().Sessions) + n.opened.Load()
	}
	return l
}

// place orders the healthy nodes for a request: those with a free warm sandbox for it first,
// each group the least loaded first (requests in flight; and open sessions, for a new session);
// ties rotate, so equal nodes share the work. An
// error, when no node is healthy, names each node and why.
func (g *Gateway) place(w want) ([]*node, error) {
	all := g.snapshot()
	var ok []*node
	for _, n := range all {
		if n.healthy() {
			ok = append(ok, n)
		}
	}
	if len(ok) == 0 {
		return nil, noNode(all)
	}
	start := int(g.rr.Add(1))
	rank := make(map[*node]int, len(ok))
	for i, n := range ok {
		rank[n] = (i + start) % len(ok)
	}
	warm := make(map[*node]int64, len(ok))
	for _, n := range ok {
		warm[n] = n.warm(w)
	}
	// Every node with a warm sandbox is as good as another for the request itself: among them,
	// and among those without, the least loaded first, so that work spreads.
	sort.SliceStable(ok, func(i, j int) bool {
		a, b := ok[i], ok[j]
		aw, bw := warm[a] > 0, warm[b] > 0
		switch {
		case aw != bw:
			return aw
		case a.load(w) != b.load(w):
			return a.load(w) < b.load(w)
		}
		return rank[a] < rank[b]
	})
	return ok, nil
}

// noNode is the error when no node can take a request.
func noNode(all []*node) error {
	if len(all) == 0 {
		return sandbox.Errorf(sandbox.KindRuntimeUnavailable, "no agentbox node is known to this gateway").
			WithHint("check the gateway's --discovery spec, and that the nodes run (agentbox serve --role node)")
	}
	whys := make([]string, len(all))
	for i, n := range all {
		whys[i] = n.why()
	}
	return sandbox.Errorf(sandbox.KindRuntimeUnavailable, "no agentbox node can take this request now (%s)", strings.Join(whys, "; ")).
		WithHint("retry shortly; if it lasts, check the nodes (GET /v1/node on each, with the cluster token)")
}

func sortedStrings(s []string) []string { slices.Sort(s); return s }

func plural(n int, what string) string {
	if n == 1 {
		return "on 1 " + what
	}
	return fmt.Sprintf("on %d %ss", n, what)
}

// Place orders the healthy nodes for a run of tier and image ("" for auto and the default), as
// a placed request would be, by their ids: for benchmarks and tests of placement itself.
func (g *Gateway) Place(tier, image string) ([]string, error) {
	order, err := g.place(want{tier: tier, image: image})
	ids := make([]string, len(order))
	for i, n := range order {
		ids[i] = n.ID
	}
	return ids, err
}
