package heavy

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/agentbox-dev/agentbox/internal/config"
)

// Modes of Config.Enabled.
const (
	Auto = "auto" // run it when this machine can, say why not otherwise
	On   = "on"   // a daemon that cannot run it does not start
	Off  = "off"
)

// Config is the heavy tier's section of the daemon's configuration ("heavy": {...}).
type Config struct {
	// Enabled is auto (default), on or off. In auto the daemon runs the heavy tier when it is
	// root and runsc and the default image are built, and logs why not otherwise.
	Enabled string `json:"enabled"`
	// Image is the default image: the one warm sandboxes run. Default python-datascience.
	Image string `json:"image"`
	// Warm is how many sandboxes are kept booted: the pool's floor. Default 2; 0 disables the pool.
	Warm *int `json:"warm"`
	// PoolMemoryMB is the memory the warm pool may grow into under demand: each claim that finds
	// it empty raises its size by one sandbox, up to this budget and never beyond max_sandboxes.
	// A sandbox counts for what the pool measured its warm sandboxes to hold (their cgroups'
	// charge, ~70 MiB with numpy and pandas preloaded; 80 MiB until the first measurement).
	// Default 1024 (12-14 sandboxes: a burst of a dozen new sessions, a small share of a 24 GiB
	// machine); 0 keeps the pool at warm.
	PoolMemoryMB *int64 `json:"pool_memory_mb"`
	// PoolShrinkAfter is how long the pool must go without a miss (or a claim that took its last
	// warm sandbox) before it gives back one sandbox above warm. Default 1m: a pool grown by a
	// burst is back at warm within minutes once the bursts stop, while a load that misses or
	// empties it now and then keeps what it needs.
	PoolShrinkAfter config.Duration `json:"pool_shrink_after"`
	// Preload are the modules warm sandboxes import before they are handed out. Default numpy
	// and pandas: a session that uses them skips ~1.1 s of imports, and each idle sandbox holds
	// ~68 MiB (PSS); ["numpy"] makes that ~41 MiB and [] ~22 MiB, at the price of importing
	// pandas (1-2 s in a sandbox) when the code does (heavy/FIGURES.md).
	Preload *[]string `json:"preload"`
	// ShareTemplatePages (default true) has the sandboxes restored from the warm template share
	// its memory: the ~43 MiB of Python with the preload imported stays in the template's page
	// file, in the host's page cache once for all of them, and each sandbox copies (64 KiB at a
	// time) only what it writes: a live idle session ~40 MiB (PSS) instead of ~63, and a step's
	// snapshot ~9 ms instead of ~15. The price: those copies in a session's first cells (~+20 ms
	// of CPU on a first pandas groupby), and ~3 ms more on each step's run after a snapshot (the
	// copies are small pieces of memory that a fork's copy-on-write then faults on one by one).
	// false restores every sandbox with a private copy of the whole template.
	ShareTemplatePages *bool `json:"share_template_pages"`
	// MaxSandboxes caps heavy sandboxes in use at once (runs and sessions). Default 16.
	MaxSandboxes int `json:"max_sandboxes"`
	// CPUs caps each sandbox's CPU use in cores. Default 1.
	CPUs float64 `json:"cpus"`
	// StateDir holds the heavy tier's sandboxes while they run. Default DATA_DIR/heavy. One
	// daemon per state directory: a second one is refused.
	StateDir string `json:"state_dir"`
	// SnapshotKeep caps the steps whose in-sandbox snapshots a session keeps for a fast rewind
	// (parked forks of its Python process and copies of its changed files), the newest. Default
	// 16. SnapshotKeepFor expires them (default 1h). SnapshotFilesMB caps the changed file
	// content one step's snapshot copies (default 256). SnapshotMemoryMB is the memory a
	// session's sandbox gets above its limit for them (default 256); past its own limit the
	// oldest go first. A rewind to a dropped step is a conflict that says why.
	SnapshotKeep     int             `json:"snapshot_keep"`
	SnapshotKeepFor  config.Duration `json:"snapshot_keep_for"`
	SnapshotFilesMB  int64           `json:"snapshot_files_mb"`
	SnapshotMemoryMB int64           `json:"snapshot_memory_mb"`
	// SnapshotKeepOnPause is how many of the newest kept snapshots survive a pause (each adds its
	// memory to the checkpoint, and so to the pause's and resume's time). Default 0.
	SnapshotKeepOnPause int `json:"snapshot_keep_on_pause"`
	// SnapshotReleaseAfter is how long a session may stay unused before the parked process of
	// its latest step's snapshot is replaced by a quiet fork of the idle interpreter, which
	// shares its memory (idle.go; with an older image's guest it is ended, and taken again
	// before the session's next use: +35 ms on that run). While both live, the two processes
	// hold every 2 MiB piece of memory either wrote since the fork twice (~26–38 MiB with pandas
	// imported, for writes of a few bytes); the next run copies what it writes of it again.
	// Default 10s; 0 keeps it.
	SnapshotReleaseAfter config.Duration `json:"snapshot_release_after"`
	// SessionHibernateAfter is how long a heavy session may stay unused before it is paused into
	// the snapshot store and its sandbox freed (as a pause does; it needs the sessions' store,
	// so not with sessions.ephemeral); its next use restores it (~0.2 s, the result's
	// timing.pool says restored). A session with a command running or a connection open
	// through the egress gateway stays live. Default 1m; 0 turns it off.
	SessionHibernateAfter config.Duration `json:"session_hibernate_after"`
	// PackageIndex is the PEP 503 simple index that packages no image has are installed from on
	// demand, with pip in the sandbox through the egress gateway (a private mirror's URL, say).
	// Default https://pypi.org/simple. The egress profile of the run or session must allow its
	// host; wheels are cached per daemon under DATA_DIR/heavy/wheels.
	PackageIndex string `json:"package_index"`
}

// ApplySnapshots sets the snapshot and hibernation settings of c on opts (zero keeps a default).
func (c Config) ApplySnapshots(opts *Options) {
	opts.HibernateAfter = c.SessionHibernateAfter.D()
	opts.SnapshotKeep, opts.SnapshotKeepFor = c.SnapshotKeep, c.SnapshotKeepFor.D()
	opts.SnapshotFilesBytes, opts.SnapshotMemoryBytes = c.SnapshotFilesMB<<20, c.SnapshotMemoryMB<<20
	opts.SnapshotKeepOnPause = c.SnapshotKeepOnPause
	opts.SnapshotReleaseIdle = c.SnapshotReleaseAfter.D()
}

// TemplateSharing says whether restored sandboxes share the template's pages
// (heavy.share_template_pages, true unless set false).
func (c Config) TemplateSharing() bool { return c.ShareTemplatePages == nil || *c.ShareTemplatePages }

// DefaultConfig is the heavy section with every default filled in.
func DefaultConfig() Config {
	warm := 2
	return Config{Enabled: Auto, Image: "python-datascience", Warm: &warm, MaxSandboxes: 16, CPUs: 1,
		SessionHibernateAfter: config.Duration(time.Minute), SnapshotReleaseAfter: config.Duration(10 * time.Second)}
}

// ConfigFrom reads the heavy section of c over the defaults and checks it.
func ConfigFrom(c config.Config) (Config, error) {
	h := DefaultConfig()
	if err := c.Tiers.Decode(string(Tier), &h); err != nil {
		return h, err
	}
	return h, h.Validate()
}

// Configure changes the heavy section of c, for code and tests that build a configuration in Go.
func Configure(c *config.Config, f func(*Config)) error {
	h, err := ConfigFrom(*c)
	if err != nil {
		return err
	}
	f(&h)
	return c.Tiers.Set(string(Tier), h)
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Enabled != Auto && c.Enabled != On && c.Enabled != Off:
		return fmt.Errorf("config: heavy.enabled is %q; use auto, on or off", c.Enabled)
	case c.Warm != nil && (*c.Warm < 0 || *c.Warm > 64):
		return fmt.Errorf("config: heavy.warm must be between 0 and 64")
	case c.PoolMemoryMB != nil && *c.PoolMemoryMB < 0, c.PoolShrinkAfter < 0:
		return fmt.Errorf("config: heavy.pool_memory_mb and heavy.pool_shrink_after must not be negative")
	case c.MaxSandboxes < 1:
		return fmt.Errorf("config: heavy.max_sandboxes must be at least 1")
	case c.CPUs < 0:
		return fmt.Errorf("config: heavy.cpus must not be negative")
	case c.SnapshotReleaseAfter < 0:
		return fmt.Errorf("config: heavy.snapshot_release_after must not be negative (0 keeps the latest step's snapshot while idle)")
	case c.SessionHibernateAfter < 0:
		return fmt.Errorf("config: heavy.session_hibernate_after must not be negative (0 turns hibernation off)")
	case c.SnapshotKeep < 0 || c.SnapshotKeep > 256, c.SnapshotKeepFor < 0, c.SnapshotFilesMB < 0, c.SnapshotMemoryMB < 0, c.SnapshotKeepOnPause < 0:
		return fmt.Errorf("config: heavy.snapshot_keep must be between 0 and 256, and snapshot_keep_for, snapshot_files_mb and snapshot_memory_mb must not be negative")
	}
	return nil
}

// StateDirOf is where the heavy tier keeps its running sandboxes: state_dir, or DATA_DIR/heavy.
func (c Config) StateDirOf(dataDir string) string {
	if c.StateDir != "" {
		return c.StateDir
	}
	return filepath.Join(dataDir, string(Tier))
}

// WarmSandboxes is the configured pool size.
func (c Config) WarmSandboxes() int {
	if c.Warm == nil {
		return 2
	}
	return *c.Warm
}

// PreloadModules is preload as Options takes it: nil for the default.
func (c Config) PreloadModules() []string {
	if c.Preload == nil {
		return nil
	}
	return append([]string{}, *c.Preload...)
}

// PoolMemoryBytes is the pool's memory budget as Options takes it: 0 for the default, negative
// for none.
func (c Config) PoolMemoryBytes() int64 {
	switch {
	case c.PoolMemoryMB == nil:
		return 0
	case *c.PoolMemoryMB == 0:
		return -1
	}
	return *c.PoolMemoryMB << 20
}
