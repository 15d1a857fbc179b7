package sandbox

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Volumes: named file systems a tenant keeps beyond its sessions. The core owns which volumes
// exist, whose they are and who holds them (through a VolumeStore); a tier that can mount them
// (Capabilities.Volumes) gets the host directories in SessionOptions.Mounts and binds them into
// its sandbox.

// VolumeInfo describes a volume.
type VolumeInfo struct {
	Name       string    `json:"name"`
	QuotaBytes int64     `json:"quota_bytes"`
	CreatedAt  time.Time `json:"created_at"`
	// MountedRW and MountedRO count the sessions that hold it now (MountedRW is 0 or 1).
	MountedRW int `json:"mounted_rw"`
	MountedRO int `json:"mounted_ro"`
}

// VolumeStore keeps the volumes of every tenant; package volumes implements it. A tenant sees
// only its own: another tenant's volume of the same name is a different volume.
type VolumeStore interface {
	Create(tenant, name string, quota int64) (VolumeInfo, error)
	List(tenant string) []VolumeInfo
	Get(tenant, name string) (VolumeInfo, error)
	// Delete removes a volume no session holds.
	Delete(tenant, name string) error
	// Attach takes a lease of a volume for a session: read-write (alone) or read-only (with other
	// read-only leases); a lease that does not fit is a conflict. It returns the host directory
	// to bind and the lease's release.
	Attach(tenant, name string, readOnly bool) (dir string, release func(), err error)
	ReadFile(tenant, name, path string) ([]byte, error)
	WriteFile(tenant, name, path string, content []byte) error
}

// VolumeHolders is a VolumeStore whose leases name the session that holds them (a cluster's
// volumes: a session moved to another node takes its read-write lease there again, and another
// session's is a conflict on every node).
type VolumeHolders interface {
	AttachFor(session, tenant, name string, readOnly bool) (dir string, release func(), err error)
}

// VolumeContents is a VolumeStore that keeps what a session's durable snapshots hold of its
// read-write volumes (a cluster's: should the session end where nobody can give its files back,
// its volumes keep those of its last durable step).
type VolumeContents interface {
	Checkpointed(session, tenant string, contents map[string]string)
}

// volumesCheckpointed tells the volume store what a session's durable snapshot holds of its
// volumes.
func (m *Manager) volumesCheckpointed(s *session, ref SnapshotRef) {
	if vc, ok := m.volumes.(VolumeContents); ok && len(ref.Volumes) > 0 {
		vc.Checkpointed(s.info.ID, s.info.Tenant, ref.Volumes)
	}
}

// Mount is a volume as a tier binds it: Source is the host directory, Path where it appears
// in the sandbox.
type Mount struct {
	Volume   string
	Source   string
	Path     string
	ReadOnly bool
}

// ParseVolumes reads a session's volumes option, {"name": "/abs/path"} or "/abs/path:ro" for
// read-only, into mounts without sources, ordered by path.
func ParseVolumes(v map[string]string) ([]Mount, error) {
	var out []Mount
	seen := map[string]string{}
	for name, p := range v {
		m := Mount{Volume: name, Path: p}
		if rest, ok := strings.CutSuffix(p, ":ro"); ok {
			m.Path, m.ReadOnly = rest, true
		} else if rest, ok := strings.CutSuffix(p, ":rw"); ok {
			m.Path = rest
		}
		clean, err := CleanPath(m.Path)
		if err != nil || !strings.HasPrefix(m.Path, "/") || clean == "/" {
			return nil, Errorf(KindInvalidRequest, "volume %q: mount path %q is not an absolute path below /", name, m.Path).
				WithHint(`give an absolute path, such as {"%s": "/mnt/%s"}, with ":ro" at the end to mount it read-only`, name, name)
		}
		for _, sys := range []string{"/proc", "/sys", "/dev", "/tmp", "/usr", "/bin", "/lib", "/etc", "/sbin", "/lib64", "/var", "/opt/agentbox"} {
			if clean == sys || strings.HasPrefix(clean, sys+"/") {
				return nil, Errorf(KindInvalidRequest, "volume %q: %s is the sandbox's own (%s)", name, clean, sys).
					WithHint("mount volumes under /mnt, /data or /home/user")
			}
		}
		if other, ok := seen[clean]; ok {
			return nil, Errorf(KindInvalidRequest, "volumes %q and %q both mount at %s", other, name, clean)
		}
		seen[clean] = name
		m.Path = clean
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func (m *Manager) volumeStore() (VolumeStore, error) {
	if m.volumes == nil {
		return nil, Errorf(KindRuntimeUnavailable, "this daemon keeps no volumes").
			WithHint("volumes need a daemon with a data directory and root (for loop mounts)")
	}
	return m.volumes, nil
}

// CreateVolume makes a volume of the caller's tenant.
func (m *Manager) CreateVolume(ctx context.Context, name string, quota int64) (VolumeInfo, error) {
	vs, err := m.volumeStore()
	if err != nil {
		return VolumeInfo{}, err
	}
	c := CallerOf(ctx)
	m.volMu.Lock()
	defer m.volMu.Unlock()
	if p, ok := m.tenantPolicy(c); ok && p.MaxVolumeBytes > 0 {
		var held int64
		for _, v := range vs.List(c.Tenant) {
			held += v.QuotaBytes
		}
		if want := quotaOrDefault(quota); held+want > p.MaxVolumeBytes {
			return VolumeInfo{}, Errorf(KindConflict, "tenant %s has volumes of %s and this one would be %s, above its quota (max_volume_mb %s)",
				c.Tenant, fmtUnit(held, 1<<20, "MiB"), fmtUnit(want, 1<<20, "MiB"), fmtUnit(p.MaxVolumeBytes, 1<<20, "MiB")).
				WithHint("remove volumes you no longer need, or ask for a smaller quota")
		}
	}
	return vs.Create(c.Tenant, name, quota)
}

// DefaultVolumeQuota is a volume's quota when its request names none (package volumes uses the
// same).
const DefaultVolumeQuota int64 = 256 << 20

func quotaOrDefault(q int64) int64 {
	if q == 0 {
		return DefaultVolumeQuota
	}
	return q
}

// Volumes lists the caller's tenant's volumes.
func (m *Manager) Volumes(ctx context.Context) ([]VolumeInfo, error) {
	vs, err := m.volumeStore()
	if err != nil {
		return nil, err
	}
	return vs.List(CallerOf(ctx).Tenant), nil
}

// Volume describes one of the caller's tenant's volumes.
func (m *Manager) Volume(ctx context.Context, name string) (VolumeInfo, error) {
	vs, err := m.volumeStore()
	if err != nil {
		return VolumeInfo{}, err
	}
	return vs.Get(CallerOf(ctx).Tenant, name)
}

// DeleteVolume removes one of the caller's tenant's volumes that no session holds.
func (m *Manager) DeleteVolume(ctx context.Context, name string) error {
	vs, err := m.volumeStore()
	if err != nil {
		return err
	}
	return vs.Delete(CallerOf(ctx).Tenant, name)
}

// ReadVolumeFile reads a file of one of the caller's tenant's volumes, with no session.
func (m *Manager) ReadVolumeFile(ctx context.Context, name, path string) ([]byte, error) {
	vs, err := m.volumeStore()
	if err != nil {
		return nil, err
	}
	return vs.ReadFile(CallerOf(ctx).Tenant, name, path)
}

// WriteVolumeFile writes a file of one of the caller's tenant's volumes that no session holds.
func (m *Manager) WriteVolumeFile(ctx context.Context, name, path string, content []byte) error {
	vs, err := m.volumeStore()
	if err != nil {
		return err
	}
	return vs.WriteFile(CallerOf(ctx).Tenant, name, path, content)
}

// attachVolumes takes the leases a new session's volumes need, for tenant, and fills
// opts.Mounts. The release gives them back; it is safe to call more than once.
func (m *Manager) attachVolumes(tenant string, opts *SessionOptions) (func(), error) {
	if len(opts.Volumes) == 0 {
		return func() {}, nil
	}
	c, _ := m.Capabilities(opts.Tier)
	if !c.Volumes {
		return nil, Errorf(KindInvalidRequest, "the %s runtime cannot mount volumes", opts.Tier).
			WithHint("use runtime %s for a session with volumes", m.instead(func(c Capabilities) bool { return c.Volumes && c.Sessions }))
	}
	vs, err := m.volumeStore()
	if err != nil {
		return nil, err
	}
	mounts, err := ParseVolumes(opts.Volumes)
	if err != nil {
		return nil, err
	}
	var releases []func()
	release := func() {
		for _, r := range releases {
			r()
		}
	}
	for i := range mounts {
		var dir string
		var r func()
		if h, ok := vs.(VolumeHolders); ok {
			dir, r, err = h.AttachFor(opts.ID, tenant, mounts[i].Volume, mounts[i].ReadOnly)
		} else {
			dir, r, err = vs.Attach(tenant, mounts[i].Volume, mounts[i].ReadOnly)
		}
		if err != nil {
			release()
			return nil, fmt.Errorf("session volumes: %w", err)
		}
		releases = append(releases, r)
		mounts[i].Source = dir
	}
	opts.Mounts = mounts
	return release, nil
}

// The volumes as the caller sees them: its tenant's only (another tenant's are not found, as the
// store keys volumes by tenant).

// CreateVolume makes a volume of the caller's tenant.
func (v *View) CreateVolume(ctx context.Context, name string, quota int64) (VolumeInfo, error) {
	return v.m.CreateVolume(v.ctx(ctx), name, quota)
}

// Volumes lists the caller's tenant's volumes.
func (v *View) Volumes(ctx context.Context) ([]VolumeInfo, error) { return v.m.Volumes(v.ctx(ctx)) }

// Volume describes one of the caller's tenant's volumes.
func (v *View) Volume(ctx context.Context, name string) (VolumeInfo, error) {
	return v.m.Volume(v.ctx(ctx), name)
}

// DeleteVolume removes one of the caller's tenant's volumes.
func (v *View) DeleteVolume(ctx context.Context, name string) error {
	return v.m.DeleteVolume(v.ctx(ctx), name)
}

// ReadVolumeFile reads a file of one of the caller's tenant's volumes.
func (v *View) ReadVolumeFile(ctx context.Context, name, path string) ([]byte, error) {
	return v.m.ReadVolumeFile(v.ctx(ctx), name, path)
}

// WriteVolumeFile writes a file of one of the caller's tenant's volumes.
func (v *View) WriteVolumeFile(ctx context.Context, name, path string, content []byte) error {
	return v.m.WriteVolumeFile(v.ctx(ctx), name, path, content)
}
