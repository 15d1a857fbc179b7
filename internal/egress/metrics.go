package egress

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The gateway's figures for GET /metrics. Label values are bounded: decisions are a fixed set,
// profiles are the operator's files.
var (
	descRequests = prometheus.NewDesc("agentbox_egress_requests_total",
		"Requests and tunnels sandboxes made through the egress gateway, by decision (allowed, denied, blocked, redacted, warned, refused, failed) and egress profile.",
		[]string{"decision", "profile"}, nil)
	descDuration = prometheus.NewDesc("agentbox_egress_request_seconds_total",
		"Time spent on requests through the egress gateway (checks and the origin's answer), by decision.", []string{"decision"}, nil)
	descAlerts = prometheus.NewDesc("agentbox_egress_alerts_total",
		"Alerts raised on repeated violations, by source (egress, or another gate such as mcp) and whether the session was ended.", []string{"source", "ended"}, nil)
	descIntents = prometheus.NewDesc("agentbox_egress_intents_active",
		"Sessions with an egress intent in force now.", nil, nil)
	descProfiles = prometheus.NewDesc("agentbox_egress_profiles",
		"Egress profiles in force (after the last reload).", nil, nil)
)

// stats are the gateway's counters, updated as events are recorded.
type stats struct {
	mu       sync.Mutex
	requests map[[2]string]int64 // decision, profile
	seconds  map[string]float64  // decision
	alerts   map[[2]string]int64 // source, ended
}

func (s *stats) request(ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.requests == nil {
		s.requests, s.seconds = map[[2]string]int64{}, map[string]float64{}
	}
	s.requests[[2]string{ev.Decision, ev.Profile}]++
	s.seconds[ev.Decision] += ev.Duration.Seconds()
}

func (s *stats) alert(al Alert) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.alerts == nil {
		s.alerts = map[[2]string]int64{}
	}
	ended := "false"
	if al.Ended {
		ended = "true"
	}
	s.alerts[[2]string{al.Source, ended}]++
}

// Interface guards.
var _ prometheus.Collector = (*Gateway)(nil)

// Describe implements prometheus.Collector.
func (g *Gateway) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRequests, descDuration, descAlerts, descIntents, descProfiles} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (g *Gateway) Collect(ch chan<- prometheus.Metric) {
	s := &g.stats
	s.mu.Lock()
	for k, n := range s.requests {
		ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(n), k[0], k[1])
	}
	for d, secs := range s.seconds {
		ch <- prometheus.MustNewConstMetric(descDuration, prometheus.CounterValue, secs, d)
	}
	for k, n := range s.alerts {
		ch <- prometheus.MustNewConstMetric(descAlerts, prometheus.CounterValue, float64(n), k[0], k[1])
	}
	s.mu.Unlock()
	now := time.Now()
	g.mu.Lock()
	active := 0
	for _, st := range g.intents {
		if now.Before(st.expires) {
			active++
		}
	}
	g.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descIntents, prometheus.GaugeValue, float64(active))
	profiles := 0
	if ps := g.profiles.Load(); ps != nil {
		profiles = len(*ps)
	}
	ch <- prometheus.MustNewConstMetric(descProfiles, prometheus.GaugeValue, float64(profiles))
}
