package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/config"
)

// NanoOptions are the settings of `agentbox bench nano`. Zero values take the documented defaults.
type NanoOptions struct {
	// N is the number of timed runs of each latency and throughput scenario. Default 200.
	N int `json:"n"`
	// Concurrency is the number of clients of the throughput scenarios. Default 4.
	Concurrency int `json:"concurrency"`
	// Reps is the number of repetitions of each compute snippet per engine. Default 5.
	Reps int `json:"reps"`
	// URL and APIKey name a running daemon to measure instead of in-process ones
	// (default: AGENTBOX_URL and AGENTBOX_API_KEY). Empty URL: the bench starts its own daemons.
	URL    string `json:"url,omitempty"`
	APIKey string `json:"-"`
	// ColdURL is a second running daemon, configured with nano.warm = 0, for the cold scenarios
	// when URL is given. Empty: the cold scenarios are skipped with URL.
	ColdURL string `json:"cold_url,omitempty"`
	// DataDir holds the nano artifacts (from `agentbox setup`) and, under bench/, what the bench
	// installs (Pyodide). Default: the daemon's default data directory.
	DataDir string `json:"data_dir"`
	// JSON writes the results as one JSON document instead of tables.
	JSON bool `json:"-"`
	// SkipBaselines skips native python3, bubblewrap and Pyodide, except the native compute runs
	// that the nano slowdown is a ratio of.
	SkipBaselines bool `json:"skip_baselines"`
	// NoCompute skips the compute slowdown scenarios.
	NoCompute bool `json:"no_compute"`
	// IdleSessions is how many idle nano sessions the density scenario opens (and how many
	// interpreter processes its baselines start). Default 100; issue 11's target is 1,000.
	IdleSessions int `json:"idle_sessions"`
	// NoDensity skips the density scenario and its baselines.
	NoDensity bool `json:"no_density"`
	// IdleWait is how long the idle sessions sit before their memory is read. Default 15s: longer
	// than the daemon's default session_hibernate_after (10s), so that they are counted as the
	// daemon keeps sessions between an agent's turns, not as it keeps one that just ran.
	IdleWait time.Duration `json:"idle_wait"`
	// Python is the native interpreter: a name on PATH or a path. Default DefaultPython.
	Python string `json:"python"`
	// PyodideVersion is the npm pyodide version to install and run. Default DefaultPyodideVersion.
	PyodideVersion string `json:"pyodide_version"`
	// Pace is how the warm latency scenario waits between runs: "health" (poll the daemon's
	// health until the pool is full again) or a fixed duration such as "500ms". Default "health".
	Pace string `json:"pace"`
	// Log receives progress lines. Default os.Stderr.
	Log io.Writer `json:"-"`
}

// nanoDefaults are the defaults of NanoOptions, as its flags show them.
func nanoDefaults() NanoOptions {
	return NanoOptions{N: 200, Concurrency: 4, Reps: 5, IdleSessions: 100, IdleWait: 15 * time.Second,
		DataDir: config.DefaultDataDir(), Python: DefaultPython(), PyodideVersion: DefaultPyodideVersion, Pace: "health", Log: os.Stderr}
}

func (o *NanoOptions) defaults() { fillDefaults(o, nanoDefaults()) }

const nanoUsage = `usage: agentbox bench nano [flags]

Measures the nano tier end to end through the HTTP API (warm pool, cold, session runs, session
create → first result, idle-session memory, compute) and, in the same run, the baselines the
figures are ratios of: native python3, python3 under bubblewrap, and Pyodide under node. Without -url it starts its own daemons in this process on
loopback ports, from the data directory's artifacts (run ` + "`agentbox setup`" + ` first).

flags:
`

func mainNano(ctx context.Context, args []string, out io.Writer) error {
	var o NanoOptions
	d := nanoDefaults()
	fs := newFlagSet("nano", nanoUsage, out)
	compute, noCompute := true, false
	fs.IntVar(&o.N, "n", d.N, "timed runs of each latency and throughput scenario")
	fs.IntVar(&o.Concurrency, "c", d.Concurrency, "concurrent clients of the throughput scenarios")
	fs.IntVar(&o.Reps, "reps", d.Reps, "repetitions of each compute snippet per engine (the median is reported)")
	fs.StringVar(&o.URL, "url", os.Getenv("AGENTBOX_URL"), "measure this running daemon instead of in-process ones (default $AGENTBOX_URL)")
	fs.StringVar(&o.APIKey, "api-key", "", "bearer token of -url and -cold-url (default $AGENTBOX_API_KEY, else the data directory's api_key file)")
	fs.StringVar(&o.ColdURL, "cold-url", "", "with -url: a second daemon with nano.warm=0 for the cold scenarios")
	fs.StringVar(&o.DataDir, "data-dir", d.DataDir, "data directory: nano artifacts, and bench/ for what the bench installs")
	fs.BoolVar(&o.JSON, "json", false, "write the results as JSON")
	fs.BoolVar(&o.SkipBaselines, "skip-baselines", false, "skip native python3, bubblewrap and Pyodide (native compute runs are kept)")
	fs.BoolVar(&compute, "compute", true, "run the compute slowdown scenarios")
	fs.BoolVar(&noCompute, "no-compute", false, "skip the compute slowdown scenarios")
	thousand := false
	fs.IntVar(&o.IdleSessions, "idle-sessions", d.IdleSessions, "idle nano sessions the density scenario opens, and baseline processes it starts (0 skips it)")
	fs.DurationVar(&o.IdleWait, "idle-wait", d.IdleWait, "how long the idle sessions sit before their memory is read (longer than the daemon's session_hibernate_after)")
	fs.BoolVar(&thousand, "sessions-1000", false, "density with 1,000 idle sessions, issue 11's target (same as -idle-sessions 1000)")
	fs.StringVar(&o.Python, "python", d.Python, "native interpreter of the baselines (its sys.executable is run, not a shim)")
	fs.StringVar(&o.PyodideVersion, "pyodide-version", d.PyodideVersion, "npm pyodide version to install and measure")
	fs.StringVar(&o.Pace, "pace", d.Pace, `warm latency pacing: "health" (wait until the daemon reports the pool full) or a fixed pause like "500ms"`)
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench nano: unexpected arguments %q", fs.Args())
	}
	o.NoCompute = noCompute || !compute
	switch {
	case thousand:
		o.IdleSessions = 1000
	case o.IdleSessions == 0:
		o.NoDensity = true
	case o.IdleSessions < 0:
		return errors.New("bench nano: -idle-sessions must not be negative")
	}
	if o.Pace != "health" {
		if d, err := time.ParseDuration(o.Pace); err != nil || d < 0 {
			return fmt.Errorf("bench nano: -pace must be \"health\" or a duration, not %q", o.Pace)
		}
	}
	if o.N < 1 || o.Concurrency < 1 || o.Reps < 1 {
		return errors.New("bench nano: -n, -c and -reps must be at least 1")
	}
	if o.ColdURL != "" && o.URL == "" {
		return errors.New("bench nano: -cold-url needs -url (without -url the bench starts its own daemons)")
	}
	if o.APIKey == "" && o.URL != "" {
		o.APIKey = apiKeyFrom(o.DataDir)
	}
	return RunNano(ctx, o, out)
}

// apiKeyFrom is the key the client would use: AGENTBOX_API_KEY, else the api_key file the daemon
// keeps in its data directory.
func apiKeyFrom(dataDir string) string {
	if k := os.Getenv("AGENTBOX_API_KEY"); k != "" {
		return k
	}
	b, err := os.ReadFile(filepath.Join(dataDir, "api_key"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
