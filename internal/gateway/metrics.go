package gateway

import (
	"bytes"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// metrics are the gateway's own.
type metrics struct {
	requests  *prometheus.HistogramVec
	placement prometheus.Histogram
	adoptions *prometheus.CounterVec
	healthy   *prometheus.GaugeVec
	inflight  *prometheus.GaugeVec
}

func newMetrics(reg *prometheus.Registry) *metrics {
	m := &metrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentbox_gateway_request_seconds",
			Help:    "Requests through the gateway, by kind of route and status, until the answer's end.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}, []string{"route", "code"}),
		placement: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agentbox_gateway_placement_seconds",
			Help: "Time to order the nodes for a placed request.", Buckets: prometheus.ExponentialBuckets(1e-6, 4, 10)}),
		adoptions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbox_gateway_adoptions_total",
			Help: "Sessions a node took over at the gateway's request, by adopting node."}, []string{"node"}),
		healthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "agentbox_gateway_node_healthy",
			Help: "1 when the node takes work, by node."}, []string{"node"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "agentbox_gateway_node_inflight",
			Help: "Requests in flight to the node, at the last poll."}, []string{"node"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.placement, m.adoptions, m.healthy, m.inflight} {
		_ = reg.Register(c)
	}
	_ = reg.Register(collectors.NewGoCollector())
	_ = reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// observe counts a finished request by the kind of its route.
func (m *metrics) observe(r *http.Request, status int, d time.Duration) {
	if status == 0 {
		status = http.StatusOK
	}
	m.requests.WithLabelValues(routeKind(r.URL.Path), strconv.Itoa(status)).Observe(d.Seconds())
}

// nodes records each node's health and load after a poll.
func (m *metrics) nodes(ns []*node) {
	m.healthy.Reset()
	m.inflight.Reset()
	for _, n := range ns {
		v := 0.0
		if n.healthy() {
			v = 1
		}
		m.healthy.WithLabelValues(n.ID).Set(v)
		m.inflight.WithLabelValues(n.ID).Set(float64(n.inflight.Load()))
	}
}

// routeKind names a path's kind of route without ids, to bound the label's values.
func routeKind(p string) string {
	switch {
	case p == "/v1/run", p == "/v1/route", p == "/v1/sessions", p == "/v1/audit", p == "/metrics", p == "/mcp", p == "/v1/health":
		return p
	case strings.HasPrefix(p, "/v1/sessions/"):
		rest := strings.TrimPrefix(p, "/v1/sessions/")
		if _, sub, ok := strings.Cut(rest, "/"); ok {
			first, _, _ := strings.Cut(sub, "/")
			return "/v1/sessions/{id}/" + first
		}
		return "/v1/sessions/{id}"
	case strings.HasPrefix(p, "/mcp/servers/"):
		return "/mcp/servers/{name}"
	case strings.HasPrefix(p, "/v1/"):
		seg, _, _ := strings.Cut(strings.TrimPrefix(p, "/v1/"), "/")
		return "/v1/" + seg
	}
	return "other"
}

// metricsAll answers GET /metrics: the gateway's own metrics, and every node's with a node label
// (each node checks the caller's key: its metrics are an admin's).
func (g *Gateway) metricsAll(w http.ResponseWriter, r *http.Request) {
	if err := identityOf(r.Context()).Allows("the metrics", auth.ScopeAdmin); err != nil {
		fail(w, err)
		return
	}
	fams := map[string]*dto.MetricFamily{}
	own, err := g.reg.Gather()
	if err != nil {
		g.log.Warn("gathering the gateway's metrics", "err", err)
	}
	for _, f := range own {
		fams[f.GetName()] = f
	}
	ans, err := g.fanOut(r, "/metrics", &body{buf: []byte{}}, 64<<20)
	if err != nil {
		fail(w, err)
		return
	}
	for _, a := range ans {
		if a.err != nil || a.status != http.StatusOK {
			g.log.Warn("a node's metrics are missing from the gateway's", "node", a.n.ID, "status", a.status, "err", a.err)
			continue
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		got, err := p.TextToMetricFamilies(bytes.NewReader(a.body))
		if err != nil {
			g.log.Warn("a node's metrics do not parse", "node", a.n.ID, "err", err)
			continue
		}
		label := "node"
		for name, f := range got {
			for _, m := range f.Metric {
				v := a.n.ID
				m.Label = append(m.Label, &dto.LabelPair{Name: &label, Value: &v})
			}
			if have, ok := fams[name]; ok && have.GetType() == f.GetType() {
				have.Metric = append(have.Metric, f.Metric...)
			} else if !ok {
				fams[name] = f
			}
		}
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	for _, n := range names {
		if _, err := expfmt.MetricFamilyToText(&buf, fams[n]); err != nil {
			fail(w, sandbox.Errorf(sandbox.KindInternal, "encoding metric %s: %v", n, err))
			return
		}
	}
	w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	_, _ = w.Write(buf.Bytes())
}
