package volumes

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The bounds of a volume's quota. Below 1 MiB ext4 has no room for its own metadata.
const (
	MinQuota     int64 = 1 << 20
	DefaultQuota       = sandbox.DefaultVolumeQuota
)

// Options configure a Store.
type Options struct {
	// MaxQuota caps one volume's quota. Default 16 GiB.
	MaxQuota int64
	// MaxPerTenant caps how many volumes one tenant has. Default 32.
	MaxPerTenant int
	// UID and GID own each volume's root directory: the user code runs as inside a sandbox.
	// Default 1000:1000, the heavy tier's.
	UID, GID int
	// Cluster, on a node of a cluster, makes the volumes the cluster's (cluster.go): their
	// records and contents in the shared store, this node's images a cache of them.
	Cluster *Cluster
}

// Store is the daemon's volumes, in dir: dir/TENANT/NAME/{volume.json,volume.img,mnt}. It is safe
// for concurrent use. It implements sandbox.VolumeStore.
type Store struct {
	dir  string
	opts Options

	mu     sync.Mutex
	leases map[key]*lease
}

type key struct{ tenant, name string }

// lease is how a volume is held now: mounted at mnt by rw (one holder) or ro (n holders).
type lease struct {
	rw bool
	n  int
	// onRelease runs when the last holder lets go, before the unmount (cluster.go); err is
	// what it could not do.
	onRelease func()
	err       error
	// stuck is the error of the unmount after the last holder let go: no session holds the
	// volume, but it is still mounted on the host. The next Attach or Delete tries again.
	stuck error
}

// meta is what volume.json keeps.
type meta struct {
	Name       string    `json:"name"`
	Tenant     string    `json:"tenant"`
	QuotaBytes int64     `json:"quota_bytes"`
	CreatedAt  time.Time `json:"created_at"`
}

var (
	_ sandbox.VolumeStore   = (*Store)(nil)
	_ sandbox.VolumeHolders = (*Store)(nil)
)

// Open opens the store in dir. Mounts left by a daemon that died are undone: no lease
// outlives its daemon.
func Open(dir string, opts Options) (*Store, error) {
	if opts.MaxQuota <= 0 {
		opts.MaxQuota = 16 << 30
	}
	if opts.MaxPerTenant <= 0 {
		opts.MaxPerTenant = 32
	}
	if opts.UID == 0 && opts.GID == 0 {
		opts.UID, opts.GID = 1000, 1000
	}
	// The directory is made with the first volume: a daemon that never makes one leaves no trace.
	s := &Store{dir: dir, opts: opts, leases: map[key]*lease{}}
	mnts, _ := filepath.Glob(filepath.Join(dir, "*", "*", "mnt"))
	for _, m := range mnts {
		if mounted(m) {
			_ = unmount(m)
		}
	}
	if opts.Cluster != nil {
		s.dropDeleted()
	}
	return s, nil
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// CheckName says what is wrong with a volume name.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return sandbox.Errorf(sandbox.KindInvalidRequest, "volume name %q is not valid", name).
			WithHint("use 1 to 63 of a-z, 0-9, '_', '.', '-', starting with a letter or digit")
	}
	return nil
}

// tenantDir names a tenant's directory; the empty tenant (the daemon's own) is "_".
func (s *Store) volDir(tenant, name string) string {
	t := "_"
	if tenant != "" {
		t = "t" + hex.EncodeToString([]byte(tenant))
	}
	return filepath.Join(s.dir, t, name)
}

func notFound(name string) error {
	return sandbox.Errorf(sandbox.KindNotFound, "no volume %q", name).
		WithHint("create it with POST /v1/volumes (agentbox volumes create %s)", name)
}

func (s *Store) read(tenant, name string) (meta, error) {
	if err := CheckName(name); err != nil {
		return meta{}, err
	}
	b, err := os.ReadFile(filepath.Join(s.volDir(tenant, name), "volume.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return meta{}, notFound(name)
	}
	if err != nil {
		return meta{}, fmt.Errorf("volume %q: %w", name, err)
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil || m.Tenant != tenant {
		return meta{}, notFound(name)
	}
	return m, nil
}

func (s *Store) info(m meta) sandbox.VolumeInfo {
	v := sandbox.VolumeInfo{Name: m.Name, QuotaBytes: m.QuotaBytes, CreatedAt: m.CreatedAt}
	if l := s.leases[key{m.Tenant, m.Name}]; l != nil && l.stuck == nil {
		if l.rw {
			v.MountedRW = 1
		} else {
			v.MountedRO = l.n
		}
	}
	return v
}

// Create makes tenant's volume name with quota bytes (0: DefaultQuota).
func (s *Store) Create(tenant, name string, quota int64) (sandbox.VolumeInfo, error) {
	if err := CheckName(name); err != nil {
		return sandbox.VolumeInfo{}, err
	}
	if quota == 0 {
		quota = DefaultQuota
	}
	if quota < MinQuota || quota > s.opts.MaxQuota {
		return sandbox.VolumeInfo{}, sandbox.Errorf(sandbox.KindInvalidRequest, "quota_bytes %d is outside %d (1 MiB) to %d", quota, MinQuota, s.opts.MaxQuota).
			WithHint("ask for a quota in that range")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.Cluster != nil {
		return s.createCluster(tenant, name, quota)
	}
	if _, err := s.read(tenant, name); err == nil {
		return sandbox.VolumeInfo{}, sandbox.Errorf(sandbox.KindConflict, "volume %q exists", name).
			WithHint("use it, or remove it first (DELETE /v1/volumes/%s)", name)
	}
	if n := len(s.list(tenant)); n >= s.opts.MaxPerTenant {
		return sandbox.VolumeInfo{}, sandbox.Errorf(sandbox.KindConflict, "%d volumes exist, the most a tenant may have", n).
			WithHint("remove volumes you no longer need")
	}
	dir := s.volDir(tenant, name)
	fail := func(err error) (sandbox.VolumeInfo, error) {
		os.RemoveAll(dir)
		return sandbox.VolumeInfo{}, fmt.Errorf("volume %q: %w", name, err)
	}
	if err := s.makeImage(dir, quota); err != nil {
		return fail(err)
	}
	m := meta{Name: name, Tenant: tenant, QuotaBytes: quota, CreatedAt: time.Now().UTC().Truncate(time.Second)}
	b, _ := json.Marshal(m)
	// volume.json last: a volume without it (a crash in between) does not exist.
	if err := writeAtomic(filepath.Join(dir, "volume.json"), b); err != nil {
		return fail(err)
	}
	return s.info(m), nil
}

// makeImage makes an empty volume of quota bytes in dir: dir/volume.img and dir/mnt.
func (s *Store) makeImage(dir string, quota int64) error {
	if err := os.MkdirAll(filepath.Join(dir, "mnt"), 0o700); err != nil {
		return err
	}
	img := filepath.Join(dir, "volume.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		return err
	}
	if err := os.Truncate(img, quota); err != nil {
		return err
	}
	// No reserved blocks (nobody is root inside), the root directory owned by the sandbox's user.
	owner := "root_owner=" + strconv.Itoa(s.opts.UID) + ":" + strconv.Itoa(s.opts.GID)
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", "-E", owner, "-L", "agentbox", img).CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// List returns tenant's volumes by name.
func (s *Store) List(tenant string) []sandbox.VolumeInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.Cluster != nil {
		return s.listCluster(tenant)
	}
	return s.list(tenant)
}

func (s *Store) list(tenant string) []sandbox.VolumeInfo {
	dirs, _ := os.ReadDir(filepath.Dir(s.volDir(tenant, "x")))
	out := []sandbox.VolumeInfo{}
	for _, d := range dirs {
		if m, err := s.read(tenant, d.Name()); err == nil {
			out = append(out, s.info(m))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Get returns tenant's volume name.
func (s *Store) Get(tenant, name string) (sandbox.VolumeInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.opts.Cluster; c != nil {
		_, r, err := c.get(tenant, name)
		if err != nil {
			return sandbox.VolumeInfo{}, err
		}
		return s.infoCluster(r), nil
	}
	m, err := s.read(tenant, name)
	if err != nil {
		return sandbox.VolumeInfo{}, err
	}
	return s.info(m), nil
}

// Delete removes tenant's volume name and everything in it. A mounted volume is a conflict.
func (s *Store) Delete(tenant, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.opts.Cluster; c != nil {
		rec, r, err := c.get(tenant, name)
		if err != nil {
			return err
		}
		if _, _, reading := c.reader(r, ""); s.leases[key{tenant, name}] != nil || c.held(r) || reading {
			return sandbox.Errorf(sandbox.KindConflict, "volume %q is mounted by a session", name).
				WithHint("close the sessions that mount it first")
		}
		if rec, err = c.own(rec, name); err != nil {
			return err
		}
		ctx, cancel := cctx()
		defer cancel()
		if err := c.Records.Delete(ctx, rec.Session, rec.Epoch); err != nil {
			return fenced(name, err)
		}
		return os.RemoveAll(s.volDir(tenant, name))
	}
	if _, err := s.read(tenant, name); err != nil {
		return err
	}
	if l := s.leases[key{tenant, name}]; l != nil && l.stuck != nil {
		if err := s.unstickLocked(key{tenant, name}, filepath.Join(s.volDir(tenant, name), "mnt")); err != nil {
			return err
		}
	}
	if s.leases[key{tenant, name}] != nil {
		return sandbox.Errorf(sandbox.KindConflict, "volume %q is mounted by a session", name).
			WithHint("close the sessions that mount it first")
	}
	dir := s.volDir(tenant, name)
	if err := os.Remove(filepath.Join(dir, "volume.json")); err != nil {
		return fmt.Errorf("volume %q: %w", name, err)
	}
	return os.RemoveAll(dir)
}

// Attach takes a lease of tenant's volume name: read-write (no other lease may hold it) or
// read-only (no read-write lease may). It returns the host directory to bind and the release.
func (s *Store) Attach(tenant, name string, readOnly bool) (string, func(), error) {
	return s.AttachFor("", tenant, name, readOnly)
}

// AttachFor is Attach for session (sandbox.VolumeHolders): on a node of a cluster the read-write
// lease names its holder, so the session takes it again wherever it moves.
func (s *Store) AttachFor(session, tenant, name string, readOnly bool) (string, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.Cluster != nil {
		return s.attachCluster(session, tenant, name, readOnly)
	}
	return s.attachLocked(tenant, name, readOnly)
}

func (s *Store) attachLocked(tenant, name string, readOnly bool) (string, func(), error) {
	if _, err := s.read(tenant, name); err != nil {
		return "", nil, err
	}
	k := key{tenant, name}
	dir := s.volDir(tenant, name)
	mnt := filepath.Join(dir, "mnt")
	l := s.leases[k]
	if l != nil && l.stuck != nil {
		if err := s.unstickLocked(k, mnt); err != nil {
			return "", nil, err
		}
		l = nil
	}
	switch {
	case l != nil && l.rw:
		return "", nil, sandbox.Errorf(sandbox.KindConflict, "volume %q is mounted read-write by another session", name).
			WithHint("a volume is mounted read-write by one session at a time: close that session, or wait")
	case l != nil && !readOnly:
		return "", nil, sandbox.Errorf(sandbox.KindConflict, "volume %q is mounted read-only by %d session(s); it cannot be mounted read-write as well", name, l.n).
			WithHint("mount it read-only (\"/path:ro\"), or close the sessions that read it")
	case l == nil:
		if err := mount(filepath.Join(dir, "volume.img"), mnt, readOnly); err != nil {
			return "", nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "volume %q cannot be mounted: %v", name, err)
		}
		l = &lease{rw: !readOnly}
		s.leases[k] = l
	}
	l.n++
	var once sync.Once
	release := func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			l.n--
			if l.n == 0 {
				delete(s.leases, k)
				if l.onRelease != nil {
					l.onRelease()
				}
				if err := unmount(mnt); err != nil {
					// Still mounted: known as such (not as held by a session) until an Attach
					// or Delete unmounts it, or the next Open does.
					s.leases[k] = &lease{stuck: err}
				}
			}
		})
	}
	return mnt, release, nil
}

// Close undoes every mount (the daemon stops; its sessions are gone).
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.leases {
		_ = unmount(filepath.Join(s.volDir(k.tenant, k.name), "mnt"))
		delete(s.leases, k)
	}
	return nil
}

func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// mount loop-mounts img at mnt. nosuid and nodev: a file made inside a sandbox never gives
// privileges on the host.
func mount(img, mnt string, readOnly bool) error {
	o := "loop,nosuid,nodev"
	if readOnly {
		o += ",ro"
	}
	// The kernel detaches a loop device after its last unmount asynchronously: a mount right
	// after a release may find the image still attached ("already mounted or mount point busy")
	// for a moment. Retried for up to ~3 s.
	var err error
	for i := 0; i < 30; i++ {
		var out []byte
		if out, err = exec.Command("mount", "-t", "ext4", "-o", o, img, mnt).CombinedOutput(); err == nil {
			return nil
		}
		err = fmt.Errorf("mount: %v: %s", err, strings.TrimSpace(string(out)))
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// unmount unmounts mnt, trying again for up to unmountBusyFor while the kernel says it is busy:
// a mount namespace made at that moment (a sandbox or a jailed worker starting, on this host)
// starts with a copy of every mount, this one too, and an unmount that propagates to a copy in
// use fails with EBUSY until the new namespace lets go of it, in milliseconds.
func unmount(mnt string) error {
	deadline := time.Now().Add(unmountBusyFor)
	for {
		err := syscall.Unmount(mnt, 0)
		if err == nil || errors.Is(err, syscall.EINVAL) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("umount %s: %w", mnt, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// unmountBusyFor is how long unmount tries again on EBUSY (a variable for tests).
var unmountBusyFor = 2 * time.Second

// unstickLocked unmounts the volume at mnt that no holder has any more but whose unmount failed
// (k, whose lease is stuck): once it is unmounted the lease is gone; otherwise the error says so,
// rather than a conflict with a session there is not.
func (s *Store) unstickLocked(k key, mnt string) error {
	if err := unmount(mnt); err != nil {
		return sandbox.Errorf(sandbox.KindRuntimeUnavailable, "volume %q is held by no session but is still mounted on the host (its unmount when the last holder let go failed too): %v", k.name, err).
			WithHint("something on the host has a file of the volume open; try again once it is closed (a daemon restart also unmounts it)")
	}
	delete(s.leases, k)
	return nil
}

// mounted reports whether dir is a mount point (its device differs from its parent's).
func mounted(dir string) bool {
	var a, b syscall.Stat_t
	if syscall.Stat(dir, &a) != nil || syscall.Stat(filepath.Dir(dir), &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}
