package sandbox

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// TenantPolicy bounds what one tenant may use, checked before any work starts. A zero field sets
// no bound of its own (the daemon's policy still applies).
type TenantPolicy struct {
	// MaxSessions caps the tenant's open sessions; MaxRuns its runs in progress (one-shot and in
	// sessions), so that a tenant at its quota leaves the warm pools to the others.
	MaxSessions int
	MaxRuns     int
	// MaxMemoryBytes caps the memory the tenant holds reserved: the memory limits of its open
	// sessions and of its one-shot runs in progress.
	MaxMemoryBytes int64
	// CPUPerHour caps the time its code ran in the last hour, counted as each run's execution
	// time: a sandbox has one CPU (nano's interpreter is one thread, heavy's cpus default 1), so
	// this bounds the CPU time it used from above.
	CPUPerHour time.Duration
	// MaxStoredBytes caps the bytes its artifacts hold in the daemon's store (when the store can
	// count them, OwnerUsage): at the quota, runs are refused; an artifact that would pass it is
	// not kept, and the run's stderr says so.
	MaxStoredBytes int64
	// MaxVolumeBytes caps the quotas of its named volumes together (volumes.go).
	MaxVolumeBytes int64
	// Max are the largest limits the tenant may ask for, at most the daemon's.
	Max Limits
	// Tiers and Images are the tiers and heavy images the tenant may use; empty means all.
	Tiers  []Tier
	Images []string
	// EgressProfiles are the egress profiles the tenant may ask for; empty means all.
	// DefaultEgressProfile is what its requests for network get when they name none.
	EgressProfiles       []string
	DefaultEgressProfile string
}

// TenantPolicies returns the policy of a tenant. The Manager owns this interface; the daemon's
// configuration (tenants) is one implementation.
type TenantPolicies interface {
	Tenant(name string) TenantPolicy
}

// usage is what one tenant holds now. Guarded by Manager.mu.
type usage struct {
	runs   int
	memory int64 // reserved by its one-shot runs in progress (sessions are counted from m.sessions)
	// spent are the execution times of its runs that ended in the last hour, oldest first.
	spent []spent
}

type spent struct {
	at time.Time
	d  time.Duration
}

// cpuLastHour sums what u spent in the hour before now, dropping older entries.
func (u *usage) cpuLastHour(now time.Time) time.Duration {
	i := 0
	for i < len(u.spent) && now.Sub(u.spent[i].at) > time.Hour {
		i++
	}
	u.spent = u.spent[i:]
	var sum time.Duration
	for _, s := range u.spent {
		sum += s.d
	}
	return sum
}

// tenantPolicy returns the policy of the caller's tenant; the daemon's own work and admins have
// none of their own.
func (m *Manager) tenantPolicy(c Caller) (TenantPolicy, bool) {
	if m.tenants == nil || c.Tenant == "" {
		return TenantPolicy{}, false
	}
	return m.tenants.Tenant(c.Tenant), true
}

// checkTenant holds a request to its tenant's policy: the tiers and images it may use, the egress
// profiles, and its limit ceiling. network says the request asks for network with profile; it
// returns the profile to use.
func (m *Manager) checkTenant(c Caller, tier Tier, image string, network bool, profile string, l Limits) (string, error) {
	p, ok := m.tenantPolicy(c)
	if !ok {
		return profile, nil
	}
	hint := "ask the daemon's admin to allow it in tenants." + c.Tenant
	if tier != "" && tier != TierAuto && len(p.Tiers) > 0 && !slices.Contains(p.Tiers, tier) {
		return "", Errorf(KindInvalidRequest, "tenant %s may not use the %s runtime (it may use %s)", c.Tenant, tier, tierList(p.Tiers)).
			WithHint("%s.runtimes", hint)
	}
	if image != "" && len(p.Images) > 0 && !slices.Contains(p.Images, image) {
		return "", Errorf(KindInvalidRequest, "tenant %s may not use the image %s (it may use %s)", c.Tenant, image, strings.Join(p.Images, ", ")).
			WithHint("%s.images", hint)
	}
	if network {
		if profile == "" {
			profile = p.DefaultEgressProfile
		}
		if profile != "" && len(p.EgressProfiles) > 0 && !slices.Contains(p.EgressProfiles, profile) {
			return "", Errorf(KindInvalidRequest, "tenant %s may not use the egress profile %s (it may use %s)", c.Tenant, profile, strings.Join(p.EgressProfiles, ", ")).
				WithHint("%s.egress_profiles", hint)
		}
	}
	type field struct {
		name      string
		got, max  int64
		unit      string
		scale     float64
		configKey string
	}
	for _, f := range []field{
		{"timeout", int64(l.Timeout), int64(p.Max.Timeout), "s", 1e9, "max_timeout"},
		{"memory", l.MemoryBytes, p.Max.MemoryBytes, "MiB", 1 << 20, "max_memory_mb"},
		{"files limit", l.FilesBytes, p.Max.FilesBytes, "bytes", 1, "max_files_bytes"},
		{"stdout limit", l.StdoutBytes, p.Max.StdoutBytes, "bytes", 1, "max_output_bytes"},
		{"stderr limit", l.StderrBytes, p.Max.StderrBytes, "bytes", 1, "max_output_bytes"},
	} {
		if f.max > 0 && f.got > f.max {
			return "", Errorf(KindInvalidRequest, "%s %s is above tenant %s's maximum of %s", f.name,
				fmtUnit(f.got, f.scale, f.unit), c.Tenant, fmtUnit(f.max, f.scale, f.unit)).
				WithHint("ask for at most %s, or %s.%s", fmtUnit(f.max, f.scale, f.unit), hint, f.configKey)
		}
	}
	return profile, nil
}

// tenantDefaults lowers the defaults a request leaves to the daemon to its tenant's maximum: a
// tenant whose ceiling is 5 s gets 5 s, not the daemon's 30 s default, when it asks for nothing.
func (m *Manager) tenantDefaults(c Caller, l Limits) Limits {
	p, ok := m.tenantPolicy(c)
	if !ok {
		return l
	}
	d := m.policy.Defaults
	lower := func(v *int64, def, max int64) {
		if *v == 0 && max > 0 && def > max {
			*v = max
		}
	}
	t := int64(l.Timeout)
	lower(&t, int64(d.Timeout), int64(p.Max.Timeout))
	l.Timeout = time.Duration(t)
	lower(&l.MemoryBytes, d.MemoryBytes, p.Max.MemoryBytes)
	lower(&l.FilesBytes, d.FilesBytes, p.Max.FilesBytes)
	lower(&l.StdoutBytes, d.StdoutBytes, p.Max.StdoutBytes)
	lower(&l.StderrBytes, d.StderrBytes, p.Max.StderrBytes)
	return l
}

// startRun takes a run slot of the caller's tenant, with memory reserved for a one-shot run
// (0 for a run in a session, whose memory its session holds). It refuses, naming the quota,
// when the tenant is at it. The returned func gives the slot back and counts what the run's code
// ran for.
func (m *Manager) startRun(c Caller, memory int64) (func(ran time.Duration), error) {
	p, ok := m.tenantPolicy(c)
	if !ok {
		return func(time.Duration) {}, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.usage[c.Tenant]
	if p.MaxRuns > 0 && u.runs >= p.MaxRuns {
		return nil, Errorf(KindConflict, "tenant %s has %d runs in progress, its quota (max_runs %d)", c.Tenant, u.runs, p.MaxRuns).
			WithHint("wait for a run to finish, or ask the daemon's admin to raise tenants.%s.max_runs", c.Tenant)
	}
	if p.MaxMemoryBytes > 0 && memory > 0 {
		if held := m.sessionMemory(c.Tenant) + u.memory; held+memory > p.MaxMemoryBytes {
			return nil, Errorf(KindConflict, "tenant %s holds %s of memory and this run asks %s more, above its quota (max_memory_mb %s)",
				c.Tenant, fmtUnit(held, 1<<20, "MiB"), fmtUnit(memory, 1<<20, "MiB"), fmtUnit(p.MaxMemoryBytes, 1<<20, "MiB")).
				WithHint("ask for less memory, close sessions, or ask the daemon's admin to raise tenants.%s.max_memory_mb", c.Tenant)
		}
	}
	if p.MaxStoredBytes > 0 {
		if stored := m.storedBytes(c.Tenant); stored >= p.MaxStoredBytes {
			return nil, Errorf(KindConflict, "tenant %s stores %s of artifacts, its quota (max_stored_mb %s)",
				c.Tenant, fmtUnit(stored, 1<<20, "MiB"), fmtUnit(p.MaxStoredBytes, 1<<20, "MiB")).
				WithHint("artifacts expire after the daemon's artifacts_ttl; or ask the daemon's admin to raise tenants.%s.max_stored_mb", c.Tenant)
		}
	}
	if p.CPUPerHour > 0 {
		if used := u.cpuLastHour(time.Now()); used >= p.CPUPerHour {
			m.usage[c.Tenant] = u
			return nil, Errorf(KindConflict, "tenant %s ran code for %v in the last hour, its quota (cpu_seconds_per_hour %g)",
				c.Tenant, used.Round(time.Millisecond), p.CPUPerHour.Seconds()).
				WithHint("wait for the hour to roll on, or ask the daemon's admin to raise tenants.%s.cpu_seconds_per_hour", c.Tenant)
		}
	}
	u.runs++
	u.memory += memory
	m.usage[c.Tenant] = u
	return func(ran time.Duration) {
		m.mu.Lock()
		defer m.mu.Unlock()
		u := m.usage[c.Tenant]
		u.runs--
		u.memory -= memory
		if p.CPUPerHour > 0 && ran > 0 {
			u.spent = append(u.spent, spent{at: time.Now(), d: ran})
		}
		m.usage[c.Tenant] = u
	}, nil
}

// TenantOf returns the tenant of a session or of a one-shot run of a tenant in progress, by id:
// the egress gateway counts what each tenant sends out with it. The daemon's own runs are not
// found (their tenant is the empty one, which has no budget).
func (m *Manager) TenantOf(id string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.sessions[id]; ok {
		return s.info.Tenant, true
	}
	t, ok := m.running[id]
	return t, ok
}

// mayUse reports whether tenant may use tier: a session does not move to a tier its tenant may
// not use.
func (m *Manager) mayUse(tenant string, tier Tier) bool {
	_, err := m.checkTenant(Caller{Tenant: tenant}, tier, "", false, "", Limits{})
	return err == nil
}

// storedBytes is what tenant's artifacts hold, 0 when the store cannot say.
func (m *Manager) storedBytes(tenant string) int64 {
	if u, ok := m.artifacts.(OwnerUsage); ok {
		return u.OwnerBytes(tenant)
	}
	return 0
}

// storeRoom says why tenant may not store size more bytes of artifacts, or "" when it may.
func (m *Manager) storeRoom(tenant string, size int64) string {
	if m.tenants == nil || tenant == "" {
		return ""
	}
	p := m.tenants.Tenant(tenant)
	if p.MaxStoredBytes <= 0 {
		return ""
	}
	if stored := m.storedBytes(tenant); stored+size > p.MaxStoredBytes {
		return fmt.Sprintf("tenant %s stores %s of artifacts and this one is %s, above its quota (max_stored_mb %s)",
			tenant, fmtUnit(stored, 1<<20, "MiB"), fmtUnit(size, 1<<20, "MiB"), fmtUnit(p.MaxStoredBytes, 1<<20, "MiB"))
	}
	return ""
}

// checkSessionQuota refuses a new session of the caller's tenant at its session or memory quota.
// The caller holds m.mu.
func (m *Manager) checkSessionQuota(c Caller, memory int64) error {
	p, ok := m.tenantPolicy(c)
	if !ok {
		return nil
	}
	n := 0
	for _, s := range m.sessions {
		if s.info.Tenant == c.Tenant {
			n++
		}
	}
	if p.MaxSessions > 0 && n >= p.MaxSessions {
		return Errorf(KindConflict, "tenant %s has %d sessions open, its quota (max_sessions %d)", c.Tenant, n, p.MaxSessions).
			WithHint("close sessions it no longer needs, or ask the daemon's admin to raise tenants.%s.max_sessions", c.Tenant)
	}
	if p.MaxMemoryBytes > 0 {
		if held := m.sessionMemory(c.Tenant) + m.usage[c.Tenant].memory; held+memory > p.MaxMemoryBytes {
			return Errorf(KindConflict, "tenant %s holds %s of memory and this session asks %s more, above its quota (max_memory_mb %s)",
				c.Tenant, fmtUnit(held, 1<<20, "MiB"), fmtUnit(memory, 1<<20, "MiB"), fmtUnit(p.MaxMemoryBytes, 1<<20, "MiB")).
				WithHint("ask for less memory, close sessions, or ask the daemon's admin to raise tenants.%s.max_memory_mb", c.Tenant)
		}
	}
	return nil
}

// sessionMemory is the memory a tenant's open sessions reserve. The caller holds m.mu.
func (m *Manager) sessionMemory(tenant string) int64 {
	var n int64
	for _, s := range m.sessions {
		if s.info.Tenant == tenant {
			n += s.info.Limits.MemoryBytes
		}
	}
	return n
}
