package bench

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/egress"
	"github.com/agentbox-dev/agentbox/internal/netns"
	"github.com/agentbox-dev/agentbox/internal/pkgindex"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
)

// `agentbox bench packages`: what installing packages on demand adds to a heavy session's first
// result, from the package index (cold) and from the daemon's wheel cache (warm), beside a session
// that installs nothing, in the same daemon and the same rounds.

// PackagesOptions are the settings of `agentbox bench packages`.
type PackagesOptions struct {
	// N is the number of timed sessions per scenario. Default 5: a cold install takes seconds.
	N       int       `json:"n"`
	DataDir string    `json:"data_dir"`
	JSON    bool      `json:"-"`
	Log     io.Writer `json:"-"`
}

// PackagesMachine is the machine as the packages figures depend on it.
type PackagesMachine struct {
	Host
	// Image is the python-datascience image's hash.
	Image string `json:"image,omitempty"`
	// Load is the load average when the run started.
	Load string `json:"load,omitempty"`
}

// pkgCompute is the compute section `bench packages` does not have.
type pkgCompute struct{}

func (pkgCompute) failures() int { return 0 }

// PackagesReport is the results of one run.
type PackagesReport = Report[PackagesMachine, PackagesOptions, pkgCompute]

// The group and rows of the report.
const (
	pgSession  = "pkg-session"
	pkgRowNone = "session, no packages"
	pkgRowCold = "session + package from the index (cold)"
	pkgRowWarm = "session + package from the wheel cache (warm)"
	// pkgIndexHost is the index's name; the daemon maps it to the bench's network namespace.
	pkgIndexHost = "pypi.mirror.test"
)

const packagesUsage = `usage: agentbox bench packages [flags]     (as root: it runs gVisor)

What installing a package on demand adds to a heavy session: from the request that creates the
session to the result of its first cell, which imports the package and prints from it, on a
daemon started in this process with the heavy tier, three ways in the same rounds (each round
runs each once, so a load that changes during the run weighs on all alike):
  - a session that installs nothing, its cell printing a constant: the baseline;
  - cold: a package the daemon has never installed (a new name each round, with one dependency),
    from a PEP 503 index the bench serves over HTTPS from a network namespace of its own, through
    the egress gateway (the daemon maps the index's name to it), into the session with pip;
  - warm: the same package each round, from the daemon's wheel cache (put there by an untimed
    round first), the index not asked.
The wheels are pure Python, built in memory: the figures are pip's and the gateway's work, not a
download's. Each session is closed after its round, untimed. The cache entries the run made are
removed at the end.

Needs root, ip(8), the heavy runtime (agentbox setup) and a python-datascience image with pip
(agentbox image build python-datascience).

flags:
`

func packagesDefaults() PackagesOptions {
	return PackagesOptions{N: 5, DataDir: config.DefaultDataDir(), Log: os.Stderr}
}

func mainPackages(ctx context.Context, args []string, out io.Writer) error {
	var o PackagesOptions
	d := packagesDefaults()
	fs := newFlagSet("packages", packagesUsage, out)
	fs.IntVar(&o.N, "n", d.N, "timed sessions per scenario")
	fs.StringVar(&o.DataDir, "data-dir", d.DataDir, "data `DIR` with the heavy runtime and the python-datascience image")
	fs.BoolVar(&o.JSON, "json", false, "write the results as JSON")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench packages: unexpected arguments %q", fs.Args())
	}
	if o.N < 1 {
		return errors.New("bench packages: -n must be at least 1")
	}
	rep, err := RunPackages(ctx, o)
	if err != nil {
		return err
	}
	return emit(ctx, out, "packages", o.JSON, rep, writePackagesReport, rep.Failed)
}

// RunPackages serves the index, starts the daemon and measures the three ways round by round.
func RunPackages(ctx context.Context, o PackagesOptions) (*PackagesReport, error) {
	fillDefaults(&o, packagesDefaults())
	if os.Geteuid() != 0 {
		return nil, errors.New("bench packages: run it as root: the sessions run in gVisor and the index in a network namespace")
	}
	l := heavy.LayoutFor(o.DataDir)
	if _, err := os.Stat(l.Runsc(heavy.RunscVersion)); err != nil {
		return nil, fmt.Errorf("bench packages: no runsc in %s: run `agentbox setup`", o.DataDir)
	}
	img, err := l.Images().Get("python-datascience")
	if err != nil || !img.Manifest.Has("pip") {
		return nil, fmt.Errorf("bench packages: the python-datascience image in %s has no pip: run `agentbox image build python-datascience`", o.DataDir)
	}
	started := time.Now()
	rep := &PackagesReport{Started: started, Settings: o, Machine: PackagesMachine{Host: thisHost(), Image: filepath.Base(img.Dir), Load: loadAvg()}}
	progress := func(format string, args ...any) {
		fmt.Fprintf(o.Log, "%s bench packages: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}

	// The packages: a new name per cold round (warm-up included), one for the warm rounds; each
	// with a dependency, so an install resolves two wheels. A random tag per run keeps the names
	// out of any earlier run's cache.
	tag := make([]byte, 4)
	rand.Read(tag)
	prefix := "abxbench_" + hex.EncodeToString(tag)
	idx := &pkgindex.Index{}
	add := func(name string) error {
		if err := idx.Add(name+"_dep", "1.0", "BASE = 41\n"); err != nil {
			return err
		}
		return idx.Add(name, "1.0", fmt.Sprintf("from %s_dep import BASE\nVALUE = BASE + 1\n", name), name+"_dep")
	}
	cold := func(round int) string { return fmt.Sprintf("%s_c%d", prefix, round+1) }
	warm := prefix + "_w"
	for r := -1; r < o.N; r++ {
		if err := add(cold(r)); err != nil {
			return nil, err
		}
	}
	if err := add(warm); err != nil {
		return nil, err
	}

	host, err := netns.NewPublicHost()
	if err != nil {
		return nil, fmt.Errorf("bench packages: the index's host: %w", err)
	}
	defer host.Close()
	tmp, err := os.MkdirTemp("", "agentbox-bench-packages-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	public, err := egress.LoadOrCreateCA(filepath.Join(tmp, "upstream-ca"))
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(tmp, "upstream.pem")
	profiles := filepath.Join(tmp, "profiles")
	if err := os.WriteFile(caFile, public.CertPEM, 0o644); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(profiles, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(profiles, "bench-pkgs.yaml"), []byte("name: bench-pkgs\nallow:\n  - domain: "+pkgIndexHost+"\n"), 0o644); err != nil {
		return nil, err
	}
	ln, err := host.Listen(443)
	if err != nil {
		return nil, fmt.Errorf("bench packages: the index's listener: %w", err)
	}
	srv := &http.Server{Handler: idx, TLSConfig: &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) { return public.Leaf(h.ServerName) }}}
	go srv.ServeTLS(ln, "", "")
	defer srv.Close()

	// The wheel cache is in the heavy tier's state directory, the bench's own.
	stateDir := filepath.Join(o.DataDir, "bench", "heavy")
	wheels := filepath.Join(stateDir, "wheels")
	before := dirNames(wheels)
	defer func() {
		// The cache entries of this run's packages go; the ones that were there stay.
		for _, n := range dirNames(wheels) {
			if !slices.Contains(before, n) {
				os.RemoveAll(filepath.Join(wheels, n))
			}
		}
	}()

	t, _, _, err := startDaemon(ctx, o.DataDir, "packages-daemon.log", func(c *daemonConfig) {
		c.Heavy.Enabled = heavy.On
		c.Heavy.StateDir = stateDir
		c.Heavy.PackageIndex = "https://" + pkgIndexHost + "/simple"
		c.Egress.Dir = filepath.Join(tmp, "egress")
		c.Egress.ProfilesDir = profiles
		c.Egress.UpstreamCAFile = caFile
		c.Egress.Hosts = map[string][]string{pkgIndexHost: {host.Addr}}
	}, progress)
	if err != nil {
		return nil, err
	}
	defer t.Close()

	// firstResult creates a session and runs its first cell, timed together; closing it is not.
	firstResult := func(pkg string) (time.Duration, string, error) {
		req := api.CreateSessionRequest{Runtime: api.RuntimeHeavy, EgressProfile: "bench-pkgs"}
		code, want := "print(42)\n", "42"
		if pkg != "" {
			req.Packages = []string{pkg}
			code = fmt.Sprintf("import %s\nprint(%s.VALUE)\n", pkg, pkg)
		}
		start := time.Now()
		s, err := t.c.CreateSession(ctx, req)
		if err != nil {
			return 0, "", err
		}
		defer t.c.CloseSession(context.Background(), s.ID)
		res, err := t.c.RunInSession(ctx, s.ID, api.RunRequest{Code: code, Timeout: 120})
		took := time.Since(start)
		if err != nil {
			return 0, "", err
		}
		if res.Error != nil || strings.TrimSpace(res.Stdout) != want {
			return 0, "", fmt.Errorf("the first cell printed %q, want %s (%+v)", res.Stdout, want, res.Error)
		}
		reasons := strings.Join(res.Routing.Reasons, "; ")
		return took, reasons, nil
	}

	type way struct {
		name, detail string
		base         bool
		pkg          func(round int) string
		from         string // what the routing reasons must name
		lat          []time.Duration
		err          error
	}
	ways := []*way{
		{name: pkgRowNone, base: true, pkg: func(int) string { return "" },
			detail: "the cell prints a constant"},
		{name: pkgRowCold, pkg: cold, from: "https://" + pkgIndexHost + "/simple",
			detail: "a package and its dependency (two pure-Python wheels) the daemon has not installed before, a new name each round, through the egress gateway; the cell imports it"},
		{name: pkgRowWarm, pkg: func(int) string { return warm }, from: "wheel cache",
			detail: "the same package each round, from the wheel cache (filled by an untimed round first); the cell imports it"},
	}
	progress("%d rounds (and one untimed) of a session with no packages, one cold install and one warm", o.N)
	for r := -1; r < o.N && ctx.Err() == nil; r++ {
		for _, w := range ways {
			if w.err != nil {
				continue
			}
			took, reasons, err := firstResult(w.pkg(r))
			if err == nil && r >= 0 && w.from != "" && !strings.Contains(reasons, w.from) { // the warm package's untimed first install comes from the index
				err = fmt.Errorf("the routing reasons do not name %q: %s", w.from, reasons)
			}
			if err != nil {
				w.err = err
				progress("%s: %v", w.name, err)
				continue
			}
			if r >= 0 {
				w.lat = append(w.lat, took)
			}
		}
		if r >= 0 {
			progress("round %d of %d done", r+1, o.N)
		}
	}
	for _, w := range ways {
		row := Row{Group: pgSession, Name: w.name, Base: w.base, Detail: w.detail}
		switch {
		case w.err != nil:
			row.Error = w.err.Error()
		case len(w.lat) == 0:
			row.Error = "not measured: " + fmt.Sprint(ctx.Err())
		default:
			s := Summarize(w.lat, 0)
			row.Stats = &s
		}
		rep.Rows = append(rep.Rows, row)
	}
	rep.Seconds = time.Since(started).Seconds()
	rep.finish(func(*PackagesReport) []Target { return nil })
	return rep, ctx.Err()
}

// dirNames lists dir's entries, none when it does not exist.
func dirNames(dir string) []string {
	es, _ := os.ReadDir(dir)
	var ns []string
	for _, e := range es {
		ns = append(ns, e.Name())
	}
	return ns
}

// writePackagesReport writes the Markdown report.
func writePackagesReport(w io.Writer, r *PackagesReport) {
	over := func(row Row) string {
		b := r.stats(pgSession, pkgRowNone)
		if b == nil || row.Base {
			return "—"
		}
		return "+" + fmtMS(row.Stats.Median-b.Median)
	}
	l := layout{
		name: "packages",
		host: r.Machine.Host,
		header: []string{
			fmt.Sprintf("heavy sessions, create → first result, %d timed per scenario after one untimed round, the scenarios interleaved round by round; python-datascience image %.12s; load average %s",
				r.Settings.N, r.Machine.Image, orDash(r.Machine.Load)),
			"added and ÷ = against the session that installs nothing, in the same rounds",
		},
		tables: []table{
			{group: pgSession, title: "Session create → first result", cols: []column{colN, colMedian, colP99, colMin,
				{"added p50 ms", over}, colRatio("÷ no packages", func(r Row) float64 { return r.Ratio }, fmtRatio)}},
		},
	}
	writeReport(w, r, l)
}
