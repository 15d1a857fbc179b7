package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/gateway"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
)

// The gateway's part of `agentbox bench cluster`: gateway overhead per request beside the same
// request sent to a node directly, placement, and sessions claimed from a warm slot.

// GatewayRow is one figure through the gateway beside its baseline, the same request sent to a
// node directly, measured in the same rounds.
type GatewayRow struct {
	Name string `json:"name"`
	// Gateway is through the gateway; Direct the baseline, to one node without the gateway.
	Gateway *Summary `json:"gateway,omitempty"`
	Direct  *Summary `json:"direct,omitempty"`
	// Spread says on which nodes the gateway's requests landed.
	Spread string `json:"spread,omitempty"`
	Failed int    `json:"failed"`
	// Note says what a row measures, or why it was not measured.
	Note string `json:"note,omitempty"`
}

// clusterBench is what the scenarios share: two nodes and a gateway in this process.
type clusterBench struct {
	o     ClusterOptions
	key   string
	token string
	ids   []string      // the nodes' ids: n1 and n2 in the report
	nodes []*httpTarget // the nodes, directly
	urls  []string
	gw    *gateway.Gateway
	via   *httpTarget // through the gateway
	// viaURL is the gateway's base URL; hc the HTTP client of raw requests (post).
	viaURL string
	hc     *http.Client
	// claimed holds the claim times of a round; closing the closes of claimed sessions.
	claimed []time.Duration
	closing sync.WaitGroup
	heavy   bool
	log     func(string, ...any)
}

// measureGateway starts two nodes and a gateway in this process and measures the gateway's
// rows: overhead beside a node called directly, placement, claims from a warm slot.
func measureGateway(ctx context.Context, o ClusterOptions, heavyOn bool) ([]GatewayRow, []Target, error) {
	b, stop, err := startCluster(ctx, o, heavyOn)
	if err != nil {
		return nil, nil, err
	}
	defer stop()
	defer b.closing.Wait()
	rows := []GatewayRow{b.overheadNoSandbox(ctx), b.overheadRun(ctx), b.placement()}
	nanoClaim := b.claim(ctx, api.RuntimeNano, o.Claims)
	rows = append(rows, nanoClaim)
	var heavyClaim *GatewayRow
	if b.heavy {
		r := b.claim(ctx, api.RuntimeHeavy, o.Claims)
		heavyClaim = &r
		rows = append(rows, r)
	}
	over := func(r GatewayRow) *Summary {
		if r.Gateway == nil || r.Direct == nil {
			return nil
		}
		return &Summary{Median: r.Gateway.Median - r.Direct.Median, P99: r.Gateway.P99 - r.Direct.P99}
	}
	targets := []Target{
		latencyTarget("gateway overhead <= 1 ms p50", rows[0].Name, over(rows[0]), false, 1),
		latencyTarget("gateway overhead <= 1 ms p50", rows[1].Name, over(rows[1]), false, 1),
		latencyTarget("claim from a warm slot <= 20 ms p99", nanoClaim.Name, nanoClaim.Gateway, true, 20),
	}
	if heavyClaim != nil {
		targets = append(targets, latencyTarget("claim from a warm slot <= 20 ms p99", heavyClaim.Name, heavyClaim.Gateway, true, 20))
	}
	return rows, targets, ctx.Err()
}

// startCluster starts two nodes (n1, n2) sharing the data directory's artifacts, and a gateway
// over them with static discovery, all in this process on loopback.
func startCluster(ctx context.Context, o ClusterOptions, heavyOn bool) (*clusterBench, func(), error) {
	b := &clusterBench{o: o, heavy: heavyOn}
	b.log = func(format string, args ...any) { fmt.Fprintf(o.Log, "bench cluster: "+format+"\n", args...) }
	rnd := make([]byte, 32)
	if _, err := rand.Read(rnd); err != nil {
		return nil, nil, err
	}
	b.key, b.token = hex.EncodeToString(rnd[:16]), hex.EncodeToString(rnd[16:])
	root := filepath.Join(o.DataDir, "bench", "cluster")
	// A fresh cluster: sessions an earlier run left in the shared store would load a node.
	if err := os.RemoveAll(root); err != nil {
		return nil, nil, err
	}
	var stops []func() error
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			_ = stops[i]()
		}
	}
	var static cluster.Static
	// Ids of their own, whose state (DATA_DIR/nodes/ID) is removed at the end.
	b.ids = []string{"gw" + randomHex(3), "gw" + randomHex(3)}
	for _, id := range b.ids {
		stops = append(stops, func() error { return os.RemoveAll(filepath.Join(o.DataDir, "nodes", id)) })
		t, dc, _, err := startDaemon(ctx, o.DataDir, "cluster-"+id+".log", func(c *daemonConfig) {
			c.APIKey = b.key
			c.Cluster = config.ClusterConfig{Role: config.RoleNode, NodeID: id, SharedDir: filepath.Join(root, "shared"), Token: b.token}
			c.Audit.Dir = filepath.Join(root, id, "audit")
			c.ArtifactsDir = filepath.Join(root, id, "artifacts")
			if b.heavy {
				c.Heavy.Enabled = heavy.On
				c.Heavy.StateDir = filepath.Join(root, id, "heavy")
			} else {
				c.Heavy.Enabled = heavy.Off
			}
		}, b.log)
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("node %s: %w", id, err)
		}
		stops = append(stops, t.Close)
		b.nodes = append(b.nodes, t)
		b.urls = append(b.urls, "http://"+dc.Listen)
		static = append(static, cluster.Node{ID: id, Addr: "http://" + dc.Listen, Healthy: true, Source: "static"})
	}
	keys, err := auth.NewKeys(b.key, "")
	if err != nil {
		stop()
		return nil, nil, err
	}
	b.gw, err = gateway.New(gateway.Options{Discovery: static, Keys: keys, Token: b.token, Version: "bench",
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		stop()
		return nil, nil, err
	}
	stops = append(stops, b.gw.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		stop()
		return nil, nil, err
	}
	srv := &http.Server{Handler: b.gw, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	stops = append(stops, srv.Close)
	b.viaURL = "http://" + ln.Addr().String()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	b.hc = &http.Client{Transport: tr}
	if b.via, err = newHTTPTarget(b.viaURL, b.key); err != nil {
		stop()
		return nil, nil, err
	}
	b.log("gateway at %s over n1 %s and n2 %s", ln.Addr(), b.urls[0], b.urls[1])
	return b, stop, nil
}

// alternate times gw and direct in turns, n rounds after two of warm-up, into a row; which goes
// first alternates by round, so neither always meets what the other left (a used warm slot).
// direct is told the node gw answered on last, so both meet the same node.
func (b *clusterBench) alternate(ctx context.Context, name string, n int, gw func() (string, error), direct func(node string) error) GatewayRow {
	row := GatewayRow{Name: name}
	var g, d []time.Duration
	spread := map[string]int{}
	last := ""
	for i := -2; i < n && ctx.Err() == nil; i++ {
		var took, dtook time.Duration
		var node string
		var err, derr error
		timeGW := func() {
			start := time.Now()
			node, err = gw()
			took = time.Since(start)
			if node != "" {
				last = node
			}
		}
		timeDirect := func() {
			start := time.Now()
			derr = direct(last)
			dtook = time.Since(start)
		}
		if i%2 == 0 {
			timeGW()
			timeDirect()
		} else {
			timeDirect()
			timeGW()
		}
		if i < 0 {
			continue
		}
		if err != nil || derr != nil {
			row.Failed++
			row.Note = fmt.Sprint(err, derr)
			continue
		}
		g, d = append(g, took), append(d, dtook)
		spread[node]++
	}
	if len(g) > 0 {
		sg, sd := Summarize(g, 0), Summarize(d, 0)
		row.Gateway, row.Direct = &sg, &sd
	}
	row.Spread = b.spread(spread, "")
	return row
}

// spread says how many of counts went to each node (n1 and n2 are the first and second).
func (b *clusterBench) spread(counts map[string]int, prefix string) string {
	return fmt.Sprintf("%sn1 %d, n2 %d", prefix, counts[b.ids[0]], counts[b.ids[1]])
}

// urlOf is a node's base URL by id.
func (b *clusterBench) urlOf(node string) string {
	if node == b.ids[1] {
		return b.urls[1]
	}
	return b.urls[0]
}

// overheadNoSandbox: GET /v1/sessions/{id} of a session on n1, through the gateway and to n1.
func (b *clusterBench) overheadNoSandbox(ctx context.Context) GatewayRow {
	name := "GET /v1/sessions/{id} (no sandbox touched)"
	s, err := b.nodes[0].c.CreateSession(ctx, api.CreateSessionRequest{Runtime: api.RuntimeNano})
	if err != nil {
		return GatewayRow{Name: name, Failed: 1, Note: err.Error()}
	}
	defer b.nodes[0].c.CloseSession(context.WithoutCancel(ctx), s.ID)
	b.log("overhead: %d rounds of GET /v1/sessions/%s", b.o.N, s.ID)
	gw := func() (string, error) {
		_, err := b.via.c.GetSession(ctx, s.ID)
		return b.ids[0], err
	}
	direct := func(string) error {
		_, err := b.nodes[0].c.GetSession(ctx, s.ID)
		return err
	}
	return b.alternate(ctx, name, b.o.N, gw, direct)
}

// overheadRun: a one-shot nano run placed by the gateway, against the same run on n1.
func (b *clusterBench) overheadRun(ctx context.Context) GatewayRow {
	name := "one-shot nano run print(1)"
	b.log("overhead: %d rounds of a one-shot nano run", b.o.N)
	req := api.RunRequest{Code: "print(1)", Runtime: api.RuntimeNano, Timeout: 30}
	body, _ := json.Marshal(req)
	gw := func() (string, error) { return b.post(ctx, b.viaURL, "/v1/run", string(body)) }
	direct := func(node string) error {
		_, err := b.post(ctx, b.urlOf(node), "/v1/run", string(body))
		return err
	}
	return b.alternate(ctx, name, b.o.N, gw, direct)
}

// post sends a JSON request with the cluster's key and reads the whole answer; the node that
// answered is the gateway's Agentbox-Node header (n1 when the request went to n1 directly).
func (b *clusterBench) post(ctx context.Context, base, path, body string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+b.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("POST %s: %s: %s", path, resp.Status, out)
	}
	return resp.Header.Get(gateway.NodeHeader), nil
}

// placement times the gateway's placement of a run (ordering the nodes by their last polled
// capacity), without sending anything.
func (b *clusterBench) placement() GatewayRow {
	row := GatewayRow{Name: "placement (order the nodes for a nano run)", Note: "in the gateway, no request sent"}
	var lat []time.Duration
	spread := map[string]int{}
	for range max(b.o.N*10, 1000) {
		start := time.Now()
		ids, err := b.gw.Place(api.RuntimeNano, "")
		lat = append(lat, time.Since(start))
		if err != nil || len(ids) == 0 {
			row.Failed++
			row.Note = fmt.Sprint(err)
			continue
		}
		spread[ids[0]]++
	}
	s := Summarize(lat, 0)
	row.Gateway = &s
	row.Spread = b.spread(spread, "first choice ")
	return row
}

// claim times a session claimed from a warm slot: POST /v1/sessions and its first result
// (print(1)), through the gateway and directly on the node the gateway chose last, each closed
// after. Before each claim it waits (untimed) until both nodes have a warm sandbox for sessions
// again and the gateway has polled them, so that every claim is from a warm slot.
func (b *clusterBench) claim(ctx context.Context, tier string, n int) GatewayRow {
	name := fmt.Sprintf("%s session claim from a warm slot (create → first result)", tier)
	b.log("claims: %d %s sessions through the gateway and on a node directly, alternating", n, tier)
	claim := func(t *httpTarget) (string, error) {
		b.waitWarm(ctx, tier)
		start := time.Now()
		s, err := t.c.CreateSession(ctx, api.CreateSessionRequest{Runtime: tier})
		if err != nil {
			return "", err
		}
		_, err = t.c.RunInSession(ctx, s.ID, api.RunRequest{Code: "print(1)", Timeout: 60})
		b.claimed = append(b.claimed, time.Since(start))
		node, _ := cluster.NodeOfSession(s.ID)
		b.closing.Add(1)
		go func() { // not timed
			defer b.closing.Done()
			_ = t.c.CloseSession(context.WithoutCancel(ctx), s.ID)
		}()
		return node, err
	}
	row := GatewayRow{Name: name}
	var g, d []time.Duration
	spread := map[string]int{}
	last := b.ids[0]
	for i := -1; i < n && ctx.Err() == nil; i++ {
		b.claimed = b.claimed[:0]
		node, err := claim(b.via)
		if node != "" {
			last = node
		}
		direct := b.nodes[0]
		if last == b.ids[1] {
			direct = b.nodes[1]
		}
		_, derr := claim(direct)
		if i < 0 {
			continue
		}
		if err != nil || derr != nil || len(b.claimed) != 2 {
			row.Failed++
			row.Note = fmt.Sprint(err, derr)
			continue
		}
		g, d = append(g, b.claimed[0]), append(d, b.claimed[1])
		spread[node]++
	}
	if len(g) > 0 {
		sg, sd := Summarize(g, 0), Summarize(d, 0)
		row.Gateway, row.Direct = &sg, &sd
	}
	row.Spread = b.spread(spread, "")
	return row
}

// waitWarm waits (at most a minute) until both nodes report a free warm sandbox for a session
// of tier, then for the gateway's next poll.
func (b *clusterBench) waitWarm(ctx context.Context, tier string) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		ok := true
		for _, u := range b.urls {
			if b.warmOn(ctx, u, tier) < 1 {
				ok = false
			}
		}
		if ok {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(600 * time.Millisecond) // the gateway polls every 500 ms
}

// warmOn reads a node's free warm sandboxes of tier.
func (b *clusterBench) warmOn(ctx context.Context, url, tier string) int {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/node", nil)
	req.Header.Set("Authorization", "Bearer "+b.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var info cluster.NodeInfo
	if json.NewDecoder(resp.Body).Decode(&info) != nil {
		return 0
	}
	t := info.Tiers[tier]
	if t.WarmSessions != nil {
		n := 0
		for _, v := range t.WarmSessions {
			n += v
		}
		return n
	}
	return t.Warm()
}

// writeGatewayReport writes the gateway's rows and their targets.
func writeGatewayReport(w io.Writer, r *ClusterResults) {
	if len(r.Gateway) == 0 {
		return
	}
	fmt.Fprintf(w, "## The gateway\n\nTwo nodes and a gateway in one process on loopback (static discovery); %d rounds per overhead row, alternating with the same request sent to the node the gateway chose.\n\n", r.N)
	fmt.Fprintf(w, "| figure | through the gateway p50 | p99 | baseline: a node directly p50 | p99 | overhead p50 | p99 | landed on | failed |\n")
	fmt.Fprintf(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, row := range r.Gateway {
		g50, g99, d50, d99, o50, o99 := "—", "—", "—", "—", "—", "—"
		if row.Gateway != nil {
			g50, g99 = fmtMS(row.Gateway.Median)+" ms", fmtMS(row.Gateway.P99)+" ms"
		}
		if row.Direct != nil && row.Gateway != nil {
			d50, d99 = fmtMS(row.Direct.Median)+" ms", fmtMS(row.Direct.P99)+" ms"
			o50, o99 = fmtMS(row.Gateway.Median-row.Direct.Median)+" ms", fmtMS(row.Gateway.P99-row.Direct.P99)+" ms"
		}
		name := row.Name
		if row.Note != "" {
			name += " (" + row.Note + ")"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", name, g50, g99, d50, d99, o50, o99, orDash(row.Spread), row.Failed)
	}
	fmt.Fprintln(w)
	writeTargets(w, r.Targets)
}
