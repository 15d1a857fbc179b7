package config

import (
	"fmt"
	"slices"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Tenants are the tenants' bounds, by tenant name ("tenants": {"acme": {...}} in the file); the
// entry "*" is the bound of every tenant not listed. A tenant's keys are in the key file
// (`agentbox keys`); this only bounds what they may use. A zero field sets no bound.
type Tenants map[string]TenantConfig

// TenantConfig bounds one tenant.
type TenantConfig struct {
	// MaxSessions caps its open sessions; MaxRuns its runs in progress, so that a tenant at its
	// quota leaves the warm pools to the others.
	MaxSessions int `json:"max_sessions"`
	MaxRuns     int `json:"max_runs"`
	// MaxMemoryMB caps the memory it holds reserved: its sessions' and running runs' limits.
	MaxMemoryMB int64 `json:"max_memory_mb"`
	// CPUSecondsPerHour caps how long its code ran in the last hour (each run's execution time,
	// an upper bound of its CPU time: a sandbox has one CPU).
	CPUSecondsPerHour float64 `json:"cpu_seconds_per_hour"`
	// MaxStoredMB caps what its artifacts hold in the daemon's store.
	MaxStoredMB int64 `json:"max_stored_mb"`
	// MaxVolumeMB caps the quotas of its named volumes together (their size on the daemon's disk).
	MaxVolumeMB int64 `json:"max_volume_mb,omitempty"`
	// EgressBytesPerDay caps what its sandboxes send out through the egress gateway per day (UTC),
	// counted per node.
	EgressBytesPerDay int64 `json:"egress_bytes_per_day"`
	// The largest limits it may ask for, at most the daemon's.
	MaxTimeout     Duration `json:"max_timeout"`
	MaxRunMemoryMB int64    `json:"max_run_memory_mb"`
	MaxFilesBytes  int64    `json:"max_files_bytes"`
	MaxOutputBytes int64    `json:"max_output_bytes"`
	// Runtimes and Images are the tiers and images it may use; empty means all.
	Runtimes []string `json:"runtimes"`
	Images   []string `json:"images"`
	// EgressProfiles are the egress profiles it may ask for (empty: all); DefaultEgressProfile is
	// what its requests for network get when they name none.
	EgressProfiles       []string `json:"egress_profiles"`
	DefaultEgressProfile string   `json:"default_egress_profile"`
}

// Tenant returns the bounds of a tenant: its own entry, else "*", else none.
func (t Tenants) Tenant(name string) sandbox.TenantPolicy {
	c, ok := t[name]
	if !ok {
		c = t["*"]
	}
	p := sandbox.TenantPolicy{
		MaxSessions:    c.MaxSessions,
		MaxRuns:        c.MaxRuns,
		MaxMemoryBytes: c.MaxMemoryMB << 20,
		CPUPerHour:     time.Duration(c.CPUSecondsPerHour * float64(time.Second)),
		MaxStoredBytes: c.MaxStoredMB << 20,
		MaxVolumeBytes: c.MaxVolumeMB << 20,
		Max: sandbox.Limits{Timeout: time.Duration(c.MaxTimeout), MemoryBytes: c.MaxRunMemoryMB << 20,
			FilesBytes: c.MaxFilesBytes, StdoutBytes: c.MaxOutputBytes, StderrBytes: c.MaxOutputBytes},
		Images:               c.Images,
		EgressProfiles:       c.EgressProfiles,
		DefaultEgressProfile: c.DefaultEgressProfile,
	}
	for _, r := range c.Runtimes {
		p.Tiers = append(p.Tiers, sandbox.Tier(r))
	}
	return p
}

// EgressBytesPerDay returns a tenant's daily egress budget: its own entry, else "*", else none.
func (t Tenants) EgressBytesPerDay(name string) int64 {
	c, ok := t[name]
	if !ok {
		c = t["*"]
	}
	return c.EgressBytesPerDay
}

// validate reports the first bound that cannot work.
func (t Tenants) validate() error {
	for name, c := range t {
		switch {
		case c.MaxSessions < 0 || c.MaxRuns < 0 || c.MaxMemoryMB < 0 || c.CPUSecondsPerHour < 0 || c.MaxStoredMB < 0 || c.MaxVolumeMB < 0 || c.EgressBytesPerDay < 0 || c.MaxTimeout < 0 || c.MaxRunMemoryMB < 0 ||
			c.MaxFilesBytes < 0 || c.MaxOutputBytes < 0:
			return fmt.Errorf("config: tenants.%s: quotas and limits must not be negative", name)
		case c.DefaultEgressProfile != "" && len(c.EgressProfiles) > 0 && !slices.Contains(c.EgressProfiles, c.DefaultEgressProfile):
			return fmt.Errorf("config: tenants.%s: default_egress_profile %q is not among its egress_profiles", name, c.DefaultEgressProfile)
		}
	}
	return nil
}
