package httpapi

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// metrics are the API's Prometheus series. Label values are bounded: routes are patterns
// (never raw paths), runtimes are tiers, outcomes are error codes.
type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	runs     *prometheus.CounterVec
	runTime  *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer, m Engine) (*metrics, error) {
	x := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentbox_http_requests_total",
			Help: "HTTP requests by method, route pattern, status and runtime (empty when no run).",
		}, []string{"method", "route", "status", "runtime"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentbox_http_request_duration_seconds",
			Help:    "HTTP request latency by method, route pattern, status and runtime.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"method", "route", "status", "runtime"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentbox_runs_total",
			Help: "Runs by runtime, outcome (ok, exception: the code raised, exit_nonzero, or the error code that ended it) and tenant (empty: the daemon's own). Tenants are configured, so the label stays bounded.",
		}, []string{"runtime", "outcome", "tenant"}),
		runTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentbox_run_duration_seconds",
			Help:    "Time of completed runs inside the daemon (timings.total_ms) by runtime and pool (warm or cold).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"runtime", "pool"}),
	}
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "agentbox_sessions_open",
		Help: "Open sessions.",
	}, func() float64 { return float64(len(m.Sessions())) })
	for _, c := range []prometheus.Collector{x.requests, x.latency, x.runs, x.runTime, open} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return x, nil
}

func (x *metrics) observeRequest(method, route string, status int, runtime string, d time.Duration) {
	l := prometheus.Labels{"method": method, "route": route, "status": statusLabel(status), "runtime": runtime}
	x.requests.With(l).Inc()
	x.latency.With(l).Observe(d.Seconds())
}

// observeRun counts a finished run of tenant. res is the result (or the partial result of err).
func (x *metrics) observeRun(runtime, tenant string, res *sandbox.Result, err error) {
	outcome := "ok"
	switch {
	case err != nil:
		outcome = string(sandbox.KindOf(err))
	case res.Error != nil:
		outcome = "exception"
	case res.ExitCode != 0:
		outcome = "exit_nonzero"
	}
	x.runs.WithLabelValues(runtime, outcome, tenant).Inc()
	if err == nil && res != nil {
		pool := res.Timing.Pool
		if pool == "" {
			pool = "unknown"
		}
		x.runTime.WithLabelValues(runtime, pool).Observe(res.Timing.Total.Seconds())
	}
}

func (s *API) handleMetrics(w http.ResponseWriter, r *http.Request) {
	s.promHandler.ServeHTTP(w, r)
}

// promLogger sends promhttp's errors to the API's log.
type promLogger struct{ s *API }

func (l promLogger) Println(v ...any) { l.s.log.Warn("metrics", "err", v) }
