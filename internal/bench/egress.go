package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/agentbox-dev/agentbox/internal/egress"
)

// EgressOptions are the settings of `agentbox bench egress`.
type EgressOptions struct {
	// N is the number of timed requests per scenario. Default 500.
	N    int  `json:"n"`
	JSON bool `json:"-"`
	// DLP, when set, measures scanning throughput on a 10 MB JSON body; the bench command sets
	// it from package dlp.
	DLP func(body []byte) (mbPerSecond, baselineMBPerSecond float64, err error) `json:"-"`
	// Inspector is the DLP stage of the proxied scenarios. Nil: none.
	Inspector egress.Inspector `json:"-"`
	Log       io.Writer        `json:"-"`
}

// EgressResults are the figures of one run.
type EgressResults struct {
	Started time.Time   `json:"started"`
	CPUs    int         `json:"cpus"`
	N       int         `json:"n"`
	Rows    []EgressRow `json:"rows"`
	DLPMBps float64     `json:"dlp_mb_per_s,omitempty"`
	// JSONValidMBps is json.Valid on the same body in the same rounds: how fast this machine
	// reads the body at the moment.
	JSONValidMBps float64 `json:"json_valid_mb_per_s,omitempty"`
	DLPError      string  `json:"dlp_error,omitempty"`
}

// EgressRow is one scenario.
type EgressRow struct {
	Name     string  `json:"name"`
	MedianMS float64 `json:"median_ms"`
	P99MS    float64 `json:"p99_ms"`
	// OverMS is the median minus the direct scenario's median of the same kind.
	OverMS float64 `json:"overhead_ms"`
}

const egressUsage = `usage: agentbox bench egress [flags]

Measures what the egress gateway adds to a small HTTPS request (GET of 1 KB from a local origin)
against the same request sent directly, in the same run: with a kept-alive connection, and with
a new connection per request (CONNECT, TLS interception, TLS to the origin). Then the DLP
scanning throughput on a 10 MB JSON body.

flags:
`

// egressDefaults are the defaults of EgressOptions, as its flags show them.
func egressDefaults() EgressOptions { return EgressOptions{N: 500, Log: os.Stderr} }

func mainEgress(ctx context.Context, args []string, out io.Writer) error {
	var o EgressOptions
	fs := newFlagSet("egress", egressUsage, out)
	fs.IntVar(&o.N, "n", egressDefaults().N, "timed requests per scenario")
	fs.BoolVar(&o.JSON, "json", false, "write the results as JSON")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if o.N < 1 {
		return errors.New("bench egress: -n must be at least 1")
	}
	o.DLP, o.Inspector = dlpBench, dlpInspector
	res, err := RunEgress(ctx, o)
	if err != nil {
		return err
	}
	return emit(ctx, out, "egress", o.JSON, res, writeEgressReport, 0)
}

// dlpBench and dlpInspector are set by the DLP package's wiring (bench_dlp.go) when present.
var (
	dlpBench     func(body []byte) (float64, float64, error)
	dlpInspector egress.Inspector
)

// staticResolver resolves the origin's name for the gateway.
type staticResolver map[string]netip.Addr

func (r staticResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, fmt.Errorf("%s: not in the bench's table", host)
}

// RunEgress measures the gateway in this process against a loopback origin.
func RunEgress(ctx context.Context, o EgressOptions) (*EgressResults, error) {
	fillDefaults(&o, egressDefaults())
	res := &EgressResults{Started: time.Now(), CPUs: runtime.NumCPU(), N: o.N}
	dir, err := os.MkdirTemp("", "agentbox-bench-egress-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	public, err := egress.LoadOrCreateCA(dir + "/public")
	if err != nil {
		return nil, err
	}
	payload := make([]byte, 1024)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	origin := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(payload) }))
	origin.TLS = &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) { return public.Leaf(h.ServerName) }}
	origin.StartTLS()
	defer origin.Close()
	port := origin.Listener.Addr().(*net.TCPAddr).Port
	const host = "origin.bench.test"
	// The bench profile lets the gateway reach the loopback origin: the SSRF guard's exception is
	// the only difference from a real profile, and it costs the same check.
	prof, err := egress.ParseProfile("bench.yaml", []byte(fmt.Sprintf(`
name: bench
mode: enforce
allow:
  - domain: %s
    ports: [%d]
allow_private: [127.0.0.1/32]
dlp:
  actions: {payment_card: block, secret: redact, private_key: block, jwt: redact, us_ssn: block, iban: log, email: log, phone: log}
alerts: {threshold: 0}
`, host, port)))
	if err != nil {
		return nil, err
	}
	ca, err := egress.LoadOrCreateCA(dir + "/gateway")
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(public.Cert)
	g, err := egress.New(egress.Options{
		Profiles:      egress.Profiles{"bench": prof},
		CA:            ca,
		Resolver:      staticResolver{host: netip.MustParseAddr("127.0.0.1")},
		UpstreamRoots: roots,
		Inspector:     o.Inspector,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, err
	}
	defer g.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			g.Serve(c, egress.Sandbox{Session: "bench", Profile: "bench"})
		}
	}()
	trustGateway := x509.NewCertPool()
	trustGateway.AddCert(ca.Cert)
	proxyURL, _ := url.Parse("http://" + ln.Addr().String())
	dialOrigin := func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, origin.Listener.Addr().String())
	}
	target := "https://" + host + ":" + strconv.Itoa(port) + "/"
	clients := []struct {
		name string
		c    *http.Client
	}{
		{"direct, kept-alive connection", &http.Client{Transport: &http.Transport{DialContext: dialOrigin, TLSClientConfig: &tls.Config{RootCAs: roots}}}},
		{"through the gateway, kept-alive connection", &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: trustGateway}}}},
		{"direct, new connection per request", &http.Client{Transport: &http.Transport{DialContext: dialOrigin, TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: true}}},
		{"through the gateway, new connection per request", &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: trustGateway}, DisableKeepAlives: true}}},
	}
	var direct float64
	for i, cl := range clients {
		fmt.Fprintf(o.Log, "bench egress: %s...\n", cl.name)
		get := func() error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
			resp, err := cl.c.Do(req)
			if err != nil {
				return err
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			if resp.StatusCode != 200 || len(b) != len(payload) {
				return fmt.Errorf("%s: %s, %d bytes", cl.name, resp.Status, len(b))
			}
			return nil
		}
		for range 20 {
			if err := get(); err != nil {
				return nil, err
			}
		}
		ms := make([]float64, 0, o.N)
		for range o.N {
			t0 := time.Now()
			if err := get(); err != nil {
				return nil, err
			}
			ms = append(ms, float64(time.Since(t0))/float64(time.Millisecond))
		}
		row := EgressRow{Name: cl.name, MedianMS: Median(ms), P99MS: Percentile(ms, 99)}
		if i%2 == 0 {
			direct = row.MedianMS
		} else {
			row.OverMS = row.MedianMS - direct
		}
		res.Rows = append(res.Rows, row)
	}
	if o.DLP != nil {
		fmt.Fprintf(o.Log, "bench egress: DLP on a 10 MB JSON body...\n")
		mbps, base, err := o.DLP(nil)
		if err != nil {
			res.DLPError = err.Error()
		}
		res.DLPMBps, res.JSONValidMBps = mbps, base
	} else {
		res.DLPError = "this build has no DLP stage"
	}
	return res, nil
}

func writeEgressReport(w io.Writer, r *EgressResults) {
	fmt.Fprintf(w, "## agentbox bench egress, %s\n\n", r.Started.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "- machine: %d CPUs; GET of 1 KB over HTTPS from a loopback origin, %d timed requests per scenario after 20 untimed\n", r.CPUs, r.N)
	fmt.Fprintf(w, "- overhead = the gateway's median minus the direct median of the same kind, measured in this run\n\n")
	fmt.Fprintln(w, "| scenario | median ms | p99 ms | overhead ms |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
	for _, row := range r.Rows {
		over := "—"
		if row.OverMS != 0 {
			over = fmt.Sprintf("%+.3f", row.OverMS)
		}
		fmt.Fprintf(w, "| %s | %.3f | %.3f | %s |\n", row.Name, row.MedianMS, row.P99MS, over)
	}
	fmt.Fprintln(w)
	if r.DLPError != "" {
		fmt.Fprintf(w, "DLP throughput: not measured (%s)\n", r.DLPError)
	} else {
		fmt.Fprintf(w, "DLP throughput on a 10 MB JSON body (default detectors, median of 20 scans): **%.0f MB/s**; json.Valid on the same body in the same rounds: %.0f MB/s\n", r.DLPMBps, r.JSONValidMBps)
	}
}
