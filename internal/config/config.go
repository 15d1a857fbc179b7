// Package config holds the daemon's one typed configuration: defaults in code, overridden by a
// JSON file and by environment variables, validated once at start.
package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
	// KeysFile holds the tenants' API keys, hashed (`agentbox keys`). Default DATA_DIR/keys.json.
	// Without it the daemon has one key, APIKey, as before tenants.
	KeysFile string `json:"keys_file"`

	Limits   LimitsConfig   `json:"limits"`
	Sessions SessionsConfig `json:"sessions"`
	Egress   EgressConfig   `json:"egress"`
	// Tiers are the tiers' own sections ("nano": {...}, "heavy": {...} in the file), by tier name.
	// Each tier's package reads and checks its section (nano.ConfigFrom); this package knows no
	// tier.
	Tiers Sections `json:"-"`
	// ArtifactsTTL is how long artifacts (figures) stay downloadable. Default 24h.
	ArtifactsTTL Duration `json:"artifacts_ttl"`
	// ArtifactsDir is where artifacts are kept. Default DATA_DIR/artifacts.
	ArtifactsDir string `json:"artifacts_dir"`
	// VolumesDir is where named volumes live (an ext4 image each). Default DATA_DIR/volumes.
	VolumesDir string `json:"volumes_dir,omitempty"`

	// Audit is the audit log.
	Audit AuditConfig `json:"audit"`

	// MCP is the gateway of hosted MCP servers (/mcp/servers/NAME, internal/mcphost).
	MCP MCPConfig `json:"mcp"`

	// Tenants bounds each tenant (quotas, runtimes, images, egress profiles, limits); see Tenants.
	Tenants Tenants `json:"tenants"`

	// E2B is the E2B front door (e2b.go).
	E2B E2BConfig `json:"e2b"`

	// Cluster is this process's part in a cluster; its zero value is today's single machine.
	Cluster ClusterConfig `json:"cluster"`
}

// The roles of ClusterConfig.Role.
const (
	RoleSingle  = ""        // one machine, no cluster (the default)
	RoleNode    = "node"    // runs sandboxes for a gateway, and reports its capacity
	RoleGateway = "gateway" // stateless: authenticates, places, proxies to nodes
)

// ClusterConfig says what this process is in a cluster of agentbox nodes behind a gateway.
// Environment variables set each field too (AGENTBOX_ROLE, AGENTBOX_NODE_ID, AGENTBOX_ADVERTISE,
// AGENTBOX_SHARED_DIR, AGENTBOX_DISCOVERY), so job files stay short.
type ClusterConfig struct {
	// Role is "" (a single machine), "node" or "gateway".
	Role string `json:"role"`
	// NodeID names a node ([a-z0-9]{1,32}); its session ids carry it (sb_<node>-<hex>).
	// Required for a node.
	NodeID string `json:"node_id"`
	// Advertise is the base URL others reach a node at. Default http:// + the listen address.
	Advertise string `json:"advertise"`
	// SharedDir is the storage every node sees (snapshots and session records that move between
	// nodes), as a directory every node mounts. A node needs it or Store.
	SharedDir string `json:"shared_dir"`
	// Store is the same storage named by a URL: s3://BUCKET/PREFIX for a bucket of an
	// S3-compatible server (configured by S3), or a directory (like SharedDir). It wins over
	// SharedDir when both are set (AGENTBOX_STORE).
	Store string `json:"store"`
	// S3 says how to reach the bucket of an s3:// Store.
	S3 S3Config `json:"s3"`
	// Discovery finds the nodes, for a gateway: static:n1=URL,n2=URL | nomad:SERVICE |
	// kube:NAMESPACE/SERVICE. Required for a gateway.
	Discovery string `json:"discovery"`
	// Token is the cluster token (AGENTBOX_CLUSTER_TOKEN): a gateway sends it to nodes' own
	// endpoints (/v1/node/*), which take it or an admin key. Never written to the file.
	Token string `json:"-"`
}

// StatePath is where this process keeps what it owns, as opposed to the runtimes' artifacts it
// shares: sessions, pools' state, the audit log, artifacts, volumes, hosted MCP servers.
// DATA_DIR for a single machine; DATA_DIR/nodes/ID for a node, so that several nodes can share
// one data directory's artifacts on one machine.
func (c Config) StatePath() string {
	if c.Cluster.Role == RoleNode && c.Cluster.NodeID != "" {
		return filepath.Join(c.DataDir, "nodes", c.Cluster.NodeID)
	}
	return c.DataDir
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

// MCPConfig configures the gateway of hosted MCP servers (internal/mcphost).
type MCPConfig struct {
	// ServerIdle stops a hosted server (its sandbox) after this long without calls; the next call
	// starts it again. Default 10m.
	ServerIdle Duration `json:"server_idle"`
	// MaxSessions bounds the stateful sessions of /mcp/servers/NAME in all, MaxSessionsPerKey
	// those opened with one API key; past either a new session is refused (conflict), so one
	// client cannot hold the daemon's memory. SessionIdle ends a session without requests.
	// Defaults 1024, 64 and 30m.
	MaxSessions       int      `json:"max_sessions"`
	MaxSessionsPerKey int      `json:"max_sessions_per_key"`
	SessionIdle       Duration `json:"session_idle"`
}

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
	// Resolver is the DNS server (host:port, UDP) the gateway resolves names with instead of the
	// system's: a filtering resolver of the operator's, or a test's that counts queries. Names in
	// Hosts are answered first. Default: the system's resolver.
	Resolver string `json:"resolver"`
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
	// IdleTimeout closes a session unused for this long (or pauses it, with PauseIdle). Default
	// 10m.
	IdleTimeout Duration `json:"idle_timeout"`
	// Ephemeral keeps sessions in memory only: they end with the daemon. By default a session's
	// record and its steps' snapshots are kept in Dir, and a restarted daemon, kill -9 included,
	// resumes each session on its next use.
	Ephemeral bool `json:"ephemeral"`
	// Dir holds the sessions' records (Dir/records) and the content-addressed store of their
	// snapshots (Dir/snapshots). One daemon at a time uses it (a lock); another finds it locked
	// and keeps its sessions in memory. Default DATA_DIR/sessions.
	Dir string `json:"dir"`
	// PauseIdle pauses a session idle for IdleTimeout instead of closing it, on tiers that can
	// pause (its state on disk, its sandbox freed); MaxLifetime then closes any session that old.
	// Default false, 24h.
	PauseIdle   bool     `json:"pause_idle"`
	MaxLifetime Duration `json:"max_lifetime"`
	// Snapshots bounds the per-step snapshots kept: per session (count and MiB), per daemon (MiB)
	// and by age. A step whose snapshot was dropped cannot be rewound to or forked (the error says
	// why). Defaults 64, 512 MiB, 4096 MiB, 168h.
	Snapshots SnapshotRetention `json:"snapshots"`
}

// SnapshotRetention bounds the per-step snapshots a daemon keeps. Zero fields take the defaults.
type SnapshotRetention struct {
	PerSession   int      `json:"per_session"`
	MBPerSession int64    `json:"mb_per_session"`
	MBTotal      int64    `json:"mb_total"`
	MaxAge       Duration `json:"max_age"`
}

// SessionsPath is the directory of sessions that outlive the daemon (Sessions.Dir).
func (c Config) SessionsPath() string {
	if c.Sessions.Dir != "" {
		return c.Sessions.Dir
	}
	return filepath.Join(c.StatePath(), "sessions")
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
		Sessions:     SessionsConfig{Max: 32, IdleTimeout: Duration(10 * time.Minute)},
		ArtifactsTTL: Duration(24 * time.Hour),
		Audit:        AuditConfig{Enabled: true, CheckpointRecords: 256, CheckpointInterval: Duration(10 * time.Second)},
		MCP: MCPConfig{ServerIdle: Duration(10 * time.Minute), MaxSessions: 1024, MaxSessionsPerKey: 64,
			SessionIdle: Duration(30 * time.Minute)},
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
func Load(path string) (Config, error) { return LoadWith(path, nil) }

// LoadWith is Load with over applied after the environment and before the validation: a
// command's flags, which override both.
func LoadWith(path string, over func(*Config)) (Config, error) {
	c := Default()
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return c, fmt.Errorf("config: %w", err)
		}
		if err := c.decode(b); err != nil {
			return c, fmt.Errorf("config %s: %w", path, err)
		}
	}
	if v := os.Getenv("AGENTBOX_LISTEN"); v != "" {
		c.Listen = v
	}
	if v := os.Getenv("AGENTBOX_API_KEY"); v != "" {
		c.APIKey = v
	}
	c.E2B.fromEnv()
	for env, field := range map[string]*string{"AGENTBOX_ROLE": &c.Cluster.Role, "AGENTBOX_NODE_ID": &c.Cluster.NodeID,
		"AGENTBOX_ADVERTISE": &c.Cluster.Advertise, "AGENTBOX_SHARED_DIR": &c.Cluster.SharedDir,
		"AGENTBOX_STORE": &c.Cluster.Store, "AGENTBOX_S3_ENDPOINT": &c.Cluster.S3.Endpoint,
		"AGENTBOX_S3_REGION": &c.Cluster.S3.Region, "AGENTBOX_S3_CREDENTIALS_FILE": &c.Cluster.S3.CredentialsFile,
		"AGENTBOX_DISCOVERY": &c.Cluster.Discovery, "AGENTBOX_CLUSTER_TOKEN": &c.Cluster.Token} {
		if v := os.Getenv(env); v != "" {
			*field = v
		}
	}
	if v := os.Getenv("AGENTBOX_S3_PATH_STYLE"); v != "" {
		c.Cluster.S3.PathStyle = v == "1" || strings.EqualFold(v, "true")
	}
	if over != nil {
		over(&c)
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
	case c.Sessions.Snapshots.PerSession < 0 || c.Sessions.Snapshots.MBPerSession < 0 || c.Sessions.Snapshots.MBTotal < 0 ||
		c.Sessions.Snapshots.MaxAge < 0 || c.Sessions.MaxLifetime < 0:
		return fmt.Errorf("config: sessions.snapshots and sessions.max_lifetime must not be negative")
	case c.Sessions.Max < 0 || c.Sessions.IdleTimeout <= 0:
		return fmt.Errorf("config: sessions.max must not be negative and sessions.idle_timeout must be positive")
	case c.ArtifactsTTL <= 0:
		return fmt.Errorf("config: artifacts_ttl must be positive")
	case c.Audit.CheckpointRecords < 1 || c.Audit.CheckpointInterval <= 0:
		return fmt.Errorf("config: audit.checkpoint_records and audit.checkpoint_interval must be positive")
	case c.MCP.ServerIdle <= 0 || c.MCP.SessionIdle <= 0 || c.MCP.MaxSessions < 1 || c.MCP.MaxSessionsPerKey < 1:
		return fmt.Errorf("config: mcp.server_idle, mcp.session_idle, mcp.max_sessions and mcp.max_sessions_per_key must be positive (defaults 10m, 30m, 1024, 64)")
	case c.MCP.MaxSessionsPerKey > c.MCP.MaxSessions:
		return fmt.Errorf("config: mcp.max_sessions_per_key (%d) is above mcp.max_sessions (%d)", c.MCP.MaxSessionsPerKey, c.MCP.MaxSessions)
	}
	if err := c.E2B.validate(); err != nil {
		return err
	}
	if err := c.Cluster.validate(); err != nil {
		return err
	}
	return c.Tenants.validate()
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
	return filepath.Join(c.StatePath(), "artifacts")
}

// VolumesPath is where named volumes live (package volumes): volumes_dir, or DATA_DIR/volumes.
func (c Config) VolumesPath() string {
	if c.VolumesDir != "" {
		return c.VolumesDir
	}
	return filepath.Join(c.StatePath(), "volumes")
}

// KeysPath is the tenant key file (`agentbox keys`): keys_file, or DATA_DIR/keys.json.
func (c Config) KeysPath() string {
	if c.KeysFile != "" {
		return c.KeysFile
	}
	return filepath.Join(c.DataDir, "keys.json")
}

// AuditDir is where the audit log lives.
func (c Config) AuditDir() string {
	if c.Audit.Dir != "" {
		return c.Audit.Dir
	}
	return filepath.Join(c.StatePath(), "audit")
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
