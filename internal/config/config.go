// Package config holds the daemon's one typed configuration: defaults in code, overridden by a
// JSON file and by environment variables, validated once at start.
package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Config is everything the daemon and the local CLI engine need.
type Config struct {
	// Listen is the HTTP address. Default 127.0.0.1:8420: loopback only, since the API runs code.
	Listen string `json:"listen"`
	// DataDir holds runtime artifacts (the CPython WASI build, compilation caches), the API key and
	// per-node state. Default: $XDG_CACHE_HOME/agentbox (usually ~/.cache/agentbox).
	DataDir string `json:"data_dir"`
	// APIKey is the bearer token. Default: AGENTBOX_API_KEY, else DataDir/api_key (created on
	// first start with mode 0600). Never written to the config file.
	APIKey string `json:"-"`
	// MaxBodyBytes bounds a request body. Default 64 MiB; larger bodies get 413.
	MaxBodyBytes int64 `json:"max_body_bytes"`

	Limits   LimitsConfig   `json:"limits"`
	Sessions SessionsConfig `json:"sessions"`
	Nano     NanoConfig     `json:"nano"`
	Heavy    HeavyConfig    `json:"heavy"`
	Egress   EgressConfig   `json:"egress"`
	// ArtifactsTTL is how long artifacts (figures) stay downloadable. Default 24h.
	ArtifactsTTL Duration `json:"artifacts_ttl"`
	// ArtifactsDir is where artifacts are kept. Default DATA_DIR/artifacts.
	ArtifactsDir string `json:"artifacts_dir"`

	// Audit is the audit log.
	Audit AuditConfig `json:"audit"`
}

// AuditConfig configures the audit log (internal/audit): a record per session event, run, egress
// request and policy change, in an append-only file with signed checkpoints.
type AuditConfig struct {
	// Enabled keeps the log. Default true. One process at a time holds a log: a second daemon (or
	// local engine of `agentbox run`) on the same directory does not start.
	Enabled bool `json:"enabled"`
	// Dir holds the log, its checkpoints and its signing key. Default DATA_DIR/audit.
	Dir string `json:"dir"`
	// CheckpointRecords and CheckpointInterval say when a checkpoint is signed: after this many
	// records or this long after the last one, whichever comes first. Defaults 256 and 10s; the
	// interval bounds what a machine crash can lose and what only the hash chain vouches for.
	CheckpointRecords  int      `json:"checkpoint_records"`
	CheckpointInterval Duration `json:"checkpoint_interval"`
	// SyncEveryRecord fsyncs every record instead of at each checkpoint. Default false: a killed
	// daemon loses nothing either way; this guards against power loss, at ~0.2 ms per record.
	SyncEveryRecord bool `json:"sync_every_record"`
}

// Heavy tier modes.
const (
	HeavyAuto = "auto" // run it when this machine can, say why not otherwise
	HeavyOn   = "on"   // a daemon that cannot run it does not start
	HeavyOff  = "off"
)

// EgressConfig configures the egress gateway heavy sandboxes with network go out through.
type EgressConfig struct {
	// Enabled runs the gateway (default true). Off, requests for network are refused.
	Enabled *bool `json:"enabled"`
	// Dir holds the gateway's CA (created on first start). Default DATA_DIR/egress.
	Dir string `json:"dir"`
	// ProfilesDir holds policy profiles (*.yaml) on top of the shipped default, strict and
	// api-only; a file may override a shipped profile by name. Default DATA_DIR/egress/profiles.
	ProfilesDir string `json:"profiles_dir"`
	// Hosts pins names to addresses for the gateway's resolver, like /etc/hosts (the SSRF guard
	// still checks them).
	Hosts map[string][]string `json:"hosts"`
	// UpstreamCAFile adds PEM certificates to the roots the gateway verifies origins with (an
	// internal CA). Default: the system's roots only.
	UpstreamCAFile string `json:"upstream_ca_file"`
}

// HeavyConfig sizes the heavy tier (gVisor).
type HeavyConfig struct {
	// Enabled is auto (default), on or off. In auto the daemon runs the heavy tier when it is
	// root and runsc and the default image are built, and logs why not otherwise.
	Enabled string `json:"enabled"`
	// Image is the default image: the one warm sandboxes run. Default python-datascience.
	Image string `json:"image"`
	// Warm is how many sandboxes are kept booted: the pool's floor. Default 2; 0 disables the pool.
	Warm *int `json:"warm"`
	// PoolMemoryMB is the memory the warm pool may grow into under demand: each claim that finds
	// it empty raises its size by one sandbox, up to this budget at ~80 MiB per idle sandbox and
	// never beyond max_sandboxes. Default 1024 (12 sandboxes: a burst of a dozen new sessions,
	// a small share of a 24 GiB machine); 0 keeps the pool at warm.
	PoolMemoryMB *int64 `json:"pool_memory_mb"`
	// PoolShrinkAfter is how long the pool must go without a miss before it gives back one
	// sandbox above warm. Default 1m: a pool grown by a burst is back at warm within minutes,
	// while a load that misses now and then keeps what it needs.
	PoolShrinkAfter Duration `json:"pool_shrink_after"`
	// Preload are the modules warm sandboxes import before they are handed out. Default numpy
	// and pandas: a session that uses them skips ~1.1 s of imports, and each idle sandbox holds
	// ~68 MiB (PSS); ["numpy"] makes that ~41 MiB and [] ~22 MiB, at the price of importing
	// pandas (1-2 s in a sandbox) when the code does (heavy/FIGURES.md).
	Preload *[]string `json:"preload"`
	// MaxSandboxes caps heavy sandboxes in use at once (runs and sessions). Default 16.
	MaxSandboxes int `json:"max_sandboxes"`
	// CPUs caps each sandbox's CPU use in cores. Default 1.
	CPUs float64 `json:"cpus"`
	// StateDir holds the heavy tier's sandboxes while they run. Default DATA_DIR/heavy. One
	// daemon per state directory: a second one is refused.
	StateDir string `json:"state_dir"`
}

// LimitsConfig is the limits policy (see sandbox.Policy).
type LimitsConfig struct {
	DefaultTimeout     Duration `json:"default_timeout"`
	MaxTimeout         Duration `json:"max_timeout"`
	DefaultMemoryMB    int64    `json:"default_memory_mb"`
	MaxMemoryMB        int64    `json:"max_memory_mb"`
	DefaultOutputBytes int64    `json:"default_output_bytes"`
	MaxOutputBytes     int64    `json:"max_output_bytes"`
	DefaultFilesBytes  int64    `json:"default_files_bytes"`
	MaxFilesBytes      int64    `json:"max_files_bytes"`
	MaxCodeBytes       int      `json:"max_code_bytes"`
	MaxFiles           int      `json:"max_files"`
	MaxFileBytes       int64    `json:"max_file_bytes"`
}

// SessionsConfig bounds stateful sessions.
type SessionsConfig struct {
	// Max open sessions per daemon. Default 32.
	Max int `json:"max"`
	// IdleTimeout closes a session unused for this long. Default 10m.
	IdleTimeout Duration `json:"idle_timeout"`
}

// NanoConfig sizes the nano tier.
type NanoConfig struct {
	// Workers is the number of jailed worker processes serving one-shot runs. Each runs one guest
	// at a time. Default: the number of CPUs, at least 2.
	Workers int `json:"workers"`
	// Warm is how many parked interpreters each one-shot worker keeps ready. 0 disables the warm
	// pool (every run starts an interpreter: the cold path). Default 2.
	Warm *int `json:"warm"`
	// SessionWarm is how many session workers, each with its interpreter parked, are started
	// ahead so that a new nano session answers its first run in milliseconds. Each costs what an
	// idle session does (~60 MiB). 0 starts every session's worker when it is created. Default 2.
	SessionWarm *int `json:"session_warm"`
	// MaxSessionWorkers bounds the nano session worker processes (each ~60 MiB); past it, a
	// session's run takes the worker of the idle session used longest ago, hibernating it first.
	// Default 64.
	MaxSessionWorkers int `json:"max_session_workers"`
	// SessionHibernateAfter is how long a nano session may stay unused before its state moves
	// out of its worker process into the daemon as a snapshot (a few MiB instead of a worker's
	// ~60 MiB); its next run restores it in a few milliseconds. "0s" keeps sessions in their
	// workers. Default 10s: agents' turns come seconds apart, and a restore costs less than a
	// turn's network round trip.
	SessionHibernateAfter Duration `json:"session_hibernate_after"`
	// Grace is how long past a run's deadline the daemon waits for the worker's own answer before
	// it kills the worker. Default 300ms: the worker interrupts a computing guest at the deadline
	// and waits up to 200ms for it to stop (the interrupt lands in microseconds; the rest is room
	// for a loaded machine) before it answers.
	Grace Duration `json:"grace"`
}

// Duration is a time.Duration written as "30s" in JSON.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Default returns the configuration with every default filled in.
func Default() Config {
	p := sandbox.DefaultPolicy()
	warm, heavyWarm := 2, 2
	workers := runtime.NumCPU()
	if workers < 2 {
		workers = 2
	}
	return Config{
		Listen:       "127.0.0.1:8420",
		DataDir:      DefaultDataDir(),
		MaxBodyBytes: 64 << 20,
		Limits: LimitsConfig{
			DefaultTimeout:     Duration(p.Defaults.Timeout),
			MaxTimeout:         Duration(p.Max.Timeout),
			DefaultMemoryMB:    p.Defaults.MemoryBytes >> 20,
			MaxMemoryMB:        p.Max.MemoryBytes >> 20,
			DefaultOutputBytes: p.Defaults.StdoutBytes,
			MaxOutputBytes:     p.Max.StdoutBytes,
			DefaultFilesBytes:  p.Defaults.FilesBytes,
			MaxFilesBytes:      p.Max.FilesBytes,
			MaxCodeBytes:       p.MaxCodeBytes,
			MaxFiles:           p.MaxFiles,
			MaxFileBytes:       p.MaxFileBytes,
		},
		Sessions: SessionsConfig{Max: 32, IdleTimeout: Duration(10 * time.Minute)},
		Nano: NanoConfig{Workers: workers, Warm: &warm, Grace: Duration(300 * time.Millisecond),
			SessionHibernateAfter: Duration(10 * time.Second)},
		Heavy:        HeavyConfig{Enabled: HeavyAuto, Image: "python-datascience", Warm: &heavyWarm, MaxSandboxes: 16, CPUs: 1},
		ArtifactsTTL: Duration(24 * time.Hour),
		Audit:        AuditConfig{Enabled: true, CheckpointRecords: 256, CheckpointInterval: Duration(10 * time.Second)},
	}
}

// DefaultDataDir is AGENTBOX_DATA_DIR if set, else the user's cache directory + "/agentbox".
func DefaultDataDir() string {
	if d := os.Getenv("AGENTBOX_DATA_DIR"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "agentbox")
	}
	return filepath.Join(os.TempDir(), "agentbox")
}

// Load returns the defaults overridden by the JSON file at path (if path is not empty) and by
// the environment (AGENTBOX_LISTEN, AGENTBOX_DATA_DIR, AGENTBOX_API_KEY), validated.
func Load(path string) (Config, error) {
	c := Default()
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return c, fmt.Errorf("config: %w", err)
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return c, fmt.Errorf("config %s: %w", path, err)
		}
	}
	if v := os.Getenv("AGENTBOX_LISTEN"); v != "" {
		c.Listen = v
	}
	if v := os.Getenv("AGENTBOX_API_KEY"); v != "" {
		c.APIKey = v
	}
	return c, c.Validate()
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	l := c.Limits
	switch {
	case c.Listen == "":
		return fmt.Errorf("config: listen address is empty")
	case c.DataDir == "":
		return fmt.Errorf("config: data_dir is empty")
	case c.MaxBodyBytes <= 0:
		return fmt.Errorf("config: max_body_bytes must be positive")
	case l.DefaultTimeout <= 0 || l.MaxTimeout < l.DefaultTimeout:
		return fmt.Errorf("config: need 0 < default_timeout (%v) <= max_timeout (%v)", time.Duration(l.DefaultTimeout), time.Duration(l.MaxTimeout))
	case l.DefaultMemoryMB < sandbox.DefaultPolicy().MinMemoryBytes>>20 || l.MaxMemoryMB < l.DefaultMemoryMB:
		return fmt.Errorf("config: need %d <= default_memory_mb (%d) <= max_memory_mb (%d)", sandbox.DefaultPolicy().MinMemoryBytes>>20, l.DefaultMemoryMB, l.MaxMemoryMB)
	case l.MaxMemoryMB > 4096:
		return fmt.Errorf("config: max_memory_mb %d is above 4096, the most a 32-bit Wasm guest can address", l.MaxMemoryMB)
	case l.DefaultOutputBytes <= 0 || l.MaxOutputBytes < l.DefaultOutputBytes:
		return fmt.Errorf("config: need 0 < default_output_bytes <= max_output_bytes")
	case l.DefaultFilesBytes <= 0 || l.MaxFilesBytes < l.DefaultFilesBytes:
		return fmt.Errorf("config: need 0 < default_files_bytes <= max_files_bytes")
	case l.MaxCodeBytes <= 0 || l.MaxFiles < 0 || l.MaxFileBytes <= 0:
		return fmt.Errorf("config: max_code_bytes and max_file_bytes must be positive, max_files not negative")
	case c.Sessions.Max < 0 || c.Sessions.IdleTimeout <= 0:
		return fmt.Errorf("config: sessions.max must not be negative and sessions.idle_timeout must be positive")
	case c.Nano.Workers < 1:
		return fmt.Errorf("config: nano.workers must be at least 1")
	case c.Nano.Warm != nil && (*c.Nano.Warm < 0 || *c.Nano.Warm > 16):
		return fmt.Errorf("config: nano.warm must be between 0 and 16")
	case c.Nano.MaxSessionWorkers < 0 || c.Nano.MaxSessionWorkers > 4096:
		return fmt.Errorf("config: nano.max_session_workers must be between 1 and 4096 (0 for the default, 64)")
	case c.Nano.SessionHibernateAfter < 0:
		return fmt.Errorf("config: nano.session_hibernate_after must not be negative")
	case c.Nano.SessionWarm != nil && (*c.Nano.SessionWarm < 0 || *c.Nano.SessionWarm > 64):
		return fmt.Errorf("config: nano.session_warm must be between 0 and 64")
	case c.Heavy.Enabled != HeavyAuto && c.Heavy.Enabled != HeavyOn && c.Heavy.Enabled != HeavyOff:
		return fmt.Errorf("config: heavy.enabled is %q; use auto, on or off", c.Heavy.Enabled)
	case c.Heavy.Warm != nil && (*c.Heavy.Warm < 0 || *c.Heavy.Warm > 64):
		return fmt.Errorf("config: heavy.warm must be between 0 and 64")
	case c.Heavy.PoolMemoryMB != nil && *c.Heavy.PoolMemoryMB < 0, c.Heavy.PoolShrinkAfter < 0:
		return fmt.Errorf("config: heavy.pool_memory_mb and heavy.pool_shrink_after must not be negative")
	case c.Heavy.MaxSandboxes < 1:
		return fmt.Errorf("config: heavy.max_sandboxes must be at least 1")
	case c.Heavy.CPUs < 0:
		return fmt.Errorf("config: heavy.cpus must not be negative")
	case c.ArtifactsTTL <= 0:
		return fmt.Errorf("config: artifacts_ttl must be positive")
	case c.Audit.CheckpointRecords < 1 || c.Audit.CheckpointInterval <= 0:
		return fmt.Errorf("config: audit.checkpoint_records and audit.checkpoint_interval must be positive")
	}
	return nil
}

// Policy turns the limits settings into the core's policy.
func (c Config) Policy() sandbox.Policy {
	l := c.Limits
	return sandbox.Policy{
		Defaults: sandbox.Limits{
			Timeout:     time.Duration(l.DefaultTimeout),
			MemoryBytes: l.DefaultMemoryMB << 20,
			StdoutBytes: l.DefaultOutputBytes,
			StderrBytes: l.DefaultOutputBytes,
			FilesBytes:  l.DefaultFilesBytes,
		},
		Max: sandbox.Limits{
			Timeout:     time.Duration(l.MaxTimeout),
			MemoryBytes: l.MaxMemoryMB << 20,
			StdoutBytes: l.MaxOutputBytes,
			StderrBytes: l.MaxOutputBytes,
			FilesBytes:  l.MaxFilesBytes,
		},
		MinMemoryBytes: sandbox.DefaultPolicy().MinMemoryBytes,
		MaxCodeBytes:   l.MaxCodeBytes,
		MaxFiles:       l.MaxFiles,
		MaxFileBytes:   l.MaxFileBytes,
	}
}

// WarmPerWorker is the configured warm count.
func (c Config) WarmPerWorker() int {
	if c.Nano.Warm == nil {
		return 2
	}
	return *c.Nano.Warm
}

// SessionWarm is the configured number of spare nano session workers.
func (c Config) SessionWarm() int {
	if c.Nano.SessionWarm == nil {
		return 2
	}
	return *c.Nano.SessionWarm
}

// NanoDir is where the nano tier's artifacts live: the CPython WASI build and its compilation cache.
func (c Config) NanoDir() string { return filepath.Join(c.DataDir, "nano") }

// HeavyStateDir is where the heavy tier keeps its running sandboxes.
func (c Config) HeavyStateDir() string {
	if c.Heavy.StateDir != "" {
		return c.Heavy.StateDir
	}
	return filepath.Join(c.DataDir, "heavy")
}

// HeavyWarm is the configured heavy pool size.
func (c Config) HeavyWarm() int {
	if c.Heavy.Warm == nil {
		return 2
	}
	return *c.Heavy.Warm
}

// HeavyPreload is heavy.preload as heavy.Options takes it: nil for the default.
func (c Config) HeavyPreload() []string {
	if c.Heavy.Preload == nil {
		return nil
	}
	return append([]string{}, *c.Heavy.Preload...)
}

// HeavyPoolMemoryBytes is the heavy pool's memory budget as heavy.Options takes it: 0 for the
// default, negative for none.
func (c Config) HeavyPoolMemoryBytes() int64 {
	switch {
	case c.Heavy.PoolMemoryMB == nil:
		return 0
	case *c.Heavy.PoolMemoryMB == 0:
		return -1
	}
	return *c.Heavy.PoolMemoryMB << 20
}

// EgressEnabled says whether the gateway runs.
func (c Config) EgressEnabled() bool { return c.Egress.Enabled == nil || *c.Egress.Enabled }

// EgressDir is where the gateway keeps its CA.
func (c Config) EgressDir() string {
	if c.Egress.Dir != "" {
		return c.Egress.Dir
	}
	return filepath.Join(c.DataDir, "egress")
}

// EgressProfilesDir is where policy profiles are read from.
func (c Config) EgressProfilesDir() string {
	if c.Egress.ProfilesDir != "" {
		return c.Egress.ProfilesDir
	}
	return filepath.Join(c.EgressDir(), "profiles")
}

// ArtifactsPath is where artifacts are kept for download.
func (c Config) ArtifactsPath() string {
	if c.ArtifactsDir != "" {
		return c.ArtifactsDir
	}
	return filepath.Join(c.DataDir, "artifacts")
}

// AuditDir is where the audit log lives.
func (c Config) AuditDir() string {
	if c.Audit.Dir != "" {
		return c.Audit.Dir
	}
	return filepath.Join(c.DataDir, "audit")
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
