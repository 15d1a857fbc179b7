package daemon_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// volumeDaemon starts a daemon with the heavy tier whose volumes live in volDir, and returns its
// client and a stop that ends it (a daemon restart is a stop and a second volumeDaemon on the
// same volDir).
func volumeDaemon(t *testing.T, volDir string) (*client.Client, func()) {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireTool(t, "mkfs.ext4")
	l := heavy.LayoutFor(config.DefaultDataDir())
	if _, err := os.Stat(l.Runsc(heavy.RunscVersion)); err != nil {
		testenv.Skip(t, "no runsc at "+l.Runsc(heavy.RunscVersion)+": run `agentbox setup`")
	}
	if _, err := l.Images().Get("python-datascience"); err != nil {
		testenv.Skip(t, err.Error())
	}
	cfg := config.Default()
	warm := 0
	mustConfigure(t, heavy.Configure(&cfg, func(h *heavy.Config) { h.Enabled, h.Warm, h.StateDir = heavy.On, &warm, t.TempDir() }))
	cfg.ArtifactsDir = t.TempDir()
	cfg.Audit.Dir = t.TempDir()
	cfg.VolumesDir = volDir
	// Sessions that outlive the daemon: this test's own (kept beside its volumes, so a restarted
	// daemon of the test sees them), never the data directory's, where other daemons leave theirs
	// (once 32 of them, the daemon's maximum: every session the test asked for was refused).
	cfg.Sessions.Dir = volDir + ".sessions"
	log := testLog(t)
	m, err := daemon.NewManager(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := daemon.NewFrontDoors(m, daemon.FrontDoorOptions{APIKey: key, Logger: log})
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			ts.Close()
			m.Close()
		}
	}
	t.Cleanup(stop)
	c, err := client.New(ts.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	return c, stop
}

func wantVolCode(t *testing.T, what string, err error, code string, words ...string) {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("%s: got %v, want %s", what, err, code)
	}
	for _, w := range words {
		if !strings.Contains(e.Message+" "+e.Hint, w) {
			t.Errorf("%s: %q does not say %q", what, e.Message+" "+e.Hint, w)
		}
	}
}

func runIn(t *testing.T, c *client.Client, id, code string) *api.Result {
	t.Helper()
	res, err := c.RunInSession(context.Background(), id, api.RunRequest{Code: code, Timeout: 60})
	if err != nil {
		t.Fatalf("run %q: %v", code, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("run %q: %+v", code, res)
	}
	return res
}

// TestDaemonHeavyVolumes: a volume written in one heavy session is read in a later one, over the
// files API without a session, and after a daemon restart; a write past its quota fails with
// ENOSPC inside the sandbox (and output_limit over the files API) and loses nothing written
// before; read-write is one session at a time, read-only many; nano refuses volumes.
func TestDaemonHeavyVolumes(t *testing.T) {
	volDir := t.TempDir()
	c, stop := volumeDaemon(t, volDir)
	ctx := context.Background()

	if _, err := c.CreateVolume(ctx, "data", 8<<20); err != nil {
		t.Fatal(err)
	}
	s1, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "heavy", Volumes: map[string]string{"data": "/mnt/data"}})
	if err != nil {
		t.Fatal(err)
	}
	runIn(t, c, s1.ID, "import os\nos.makedirs('/mnt/data/sub', exist_ok=True)\nopen('/mnt/data/sub/a.txt', 'w').write('hello from session 1')\nopen('/mnt/data/keep.bin', 'wb').write(b'k' * (1 << 20))\n")

	// A write past the quota: ENOSPC inside, and the files written before are whole.
	res := runIn(t, c, s1.ID, "import errno\ntry:\n    with open('/mnt/data/big.bin', 'wb') as f:\n        for _ in range(16):\n            f.write(b'x' * (1 << 20))\n            f.flush()\n    print('no error')\nexcept OSError as e:\n    print('errno', errno.errorcode[e.errno])\nimport os\nos.remove('/mnt/data/big.bin')\nprint(os.path.getsize('/mnt/data/keep.bin'), open('/mnt/data/sub/a.txt').read())\n")
	if res.Stdout != "errno ENOSPC\n1048576 hello from session 1\n" {
		t.Fatalf("over quota: %q %q", res.Stdout, res.Stderr)
	}

	t.Run("OneWriter", func(t *testing.T) {
		_, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "heavy", Volumes: map[string]string{"data": "/mnt/data"}})
		wantVolCode(t, "second read-write", err, "conflict", "read-write")
		_, err = c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "heavy", Volumes: map[string]string{"data": "/mnt/data:ro"}})
		wantVolCode(t, "read-only beside read-write", err, "conflict")
		err = c.WriteVolumeFile(ctx, "data", "x.txt", []byte("x"))
		wantVolCode(t, "files API write while mounted", err, "conflict")
		err = c.DeleteVolume(ctx, "data")
		wantVolCode(t, "delete while mounted", err, "conflict")
		v, err := c.Volume(ctx, "data")
		if err != nil || v.MountedRW != 1 {
			t.Fatalf("volume %+v %v", v, err)
		}
	})
	t.Run("NanoRefuses", func(t *testing.T) {
		_, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "nano", Volumes: map[string]string{"data": "/mnt/x:ro"}})
		wantVolCode(t, "nano", err, "invalid_request", "nano", "heavy")
		_, err = c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "heavy", Volumes: map[string]string{"nope": "/mnt/x"}})
		wantVolCode(t, "unknown volume", err, "not_found", "nope")
		_, err = c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "heavy", Volumes: map[string]string{"data": "/etc/x:ro"}})
		wantVolCode(t, "system path", err, "invalid_request", "/etc")
	})
	if err := c.CloseSession(ctx, s1.ID); err != nil {
		t.Fatal(err)
	}

	// Without a session: the files API reads what the session wrote and writes what the next reads.
	b, err := c.ReadVolumeFile(ctx, "data", "sub/a.txt")
	if err != nil || string(b) != "hello from session 1" {
		t.Fatalf("files API read: %q %v", b, err)
	}
	if err := c.WriteVolumeFile(ctx, "data", "from-api/b.txt", []byte("written by the API")); err != nil {
		t.Fatal(err)
	}
	err = c.WriteVolumeFile(ctx, "data", "keep.bin", make([]byte, 9<<20))
	wantVolCode(t, "files API over quota", err, "output_limit", "quota")
	if b, err := c.ReadVolumeFile(ctx, "data", "keep.bin"); err != nil || len(b) != 1<<20 || b[0] != 'k' {
		t.Fatalf("after the refused write: %d bytes %v", len(b), err)
	}

	// Read-only by many at once; a read-only mount refuses writes inside.
	var ro []string
	for range 2 {
		s, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "heavy", Volumes: map[string]string{"data": "/data:ro"}})
		if err != nil {
			t.Fatal(err)
		}
		ro = append(ro, s.ID)
	}
	for _, id := range ro {
		res := runIn(t, c, id, "print(open('/data/sub/a.txt').read(), open('/data/from-api/b.txt').read())\ntry:\n    open('/data/w', 'w')\nexcept OSError as e:\n    print(type(e).__name__)\n")
		if res.Stdout != "hello from session 1 written by the API\nOSError\n" {
			t.Fatalf("read-only session: %q %q", res.Stdout, res.Stderr)
		}
	}
	if v, err := c.Volume(ctx, "data"); err != nil || v.MountedRO != 2 {
		t.Fatalf("volume %+v %v", v, err)
	}

	// A daemon restart: the volume and its files are still there.
	stop()
	c, _ = volumeDaemon(t, volDir)
	vs, err := c.Volumes(ctx)
	if err != nil || len(vs) != 1 || vs[0].Name != "data" || vs[0].QuotaBytes != 8<<20 || vs[0].MountedRO != 0 {
		t.Fatalf("after restart: %+v %v", vs, err)
	}
	s3, err := c.CreateSession(ctx, api.CreateSessionRequest{Volumes: map[string]string{"data": "/mnt/data"}})
	if err != nil {
		t.Fatal(err)
	}
	if s3.Runtime != "heavy" {
		t.Errorf("an auto session with volumes went to %s", s3.Runtime)
	}
	res = runIn(t, c, s3.ID, "print(open('/mnt/data/sub/a.txt').read())\nimport os\nprint(os.getuid(), os.stat('/mnt/data').st_uid)\n")
	if res.Stdout != "hello from session 1\n1000 1000\n" {
		t.Fatalf("after restart: %q %q", res.Stdout, res.Stderr)
	}
	c.CloseSession(ctx, s3.ID)
	if err := c.DeleteVolume(ctx, "data"); err != nil {
		t.Fatal(err)
	}
	_, err = c.ReadVolumeFile(ctx, "data", "sub/a.txt")
	wantVolCode(t, "after delete", err, "not_found")
}

// Volumes over HTTP are their tenant's: another tenant meets acme's volume as if it did not
// exist, whatever it asks, and its own volume of the same name is another one; a tenant's volumes
// together stay within its max_volume_mb.
func TestVolumesAreTenants(t *testing.T) {
	testenv.RequireTool(t, "mkfs.ext4")
	url, keys := tenantDaemonWith(t, config.Tenants{"acme": {MaxVolumeMB: 3}})
	a, _ := tenantClient(t, url, keys, "acme", auth.ScopeFiles, auth.ScopeSessions)
	b, _ := tenantClient(t, url, keys, "beta", auth.ScopeFiles, auth.ScopeSessions)
	ctx := context.Background()
	if _, err := a.CreateVolume(ctx, "data", 2<<20); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteVolumeFile(ctx, "data", "secret.txt", []byte("acme-only")); err != nil {
		t.Fatal(err)
	}
	_, err := b.Volume(ctx, "data")
	wantCode(t, "beta gets acme's volume", err, api.CodeNotFound)
	_, err = b.ReadVolumeFile(ctx, "data", "secret.txt")
	wantCode(t, "beta reads acme's volume", err, api.CodeNotFound)
	wantCode(t, "beta writes acme's volume", b.WriteVolumeFile(ctx, "data", "x.txt", []byte("x")), api.CodeNotFound)
	wantCode(t, "beta removes acme's volume", b.DeleteVolume(ctx, "data"), api.CodeNotFound)
	_, err = b.CreateSession(ctx, api.CreateSessionRequest{Runtime: "nano", Volumes: map[string]string{"data": "/mnt/data"}})
	wantCode(t, "beta mounts a volume on nano", err, api.CodeInvalidRequest)
	if l, err := b.Volumes(ctx); err != nil || len(l) != 0 {
		t.Fatalf("beta lists %+v %v", l, err)
	}
	if _, err := b.CreateVolume(ctx, "data", 2<<20); err != nil {
		t.Fatalf("beta's own data: %v", err)
	}
	_, err = b.ReadVolumeFile(ctx, "data", "secret.txt")
	wantCode(t, "beta's own volume has no acme file", err, api.CodeNotFound)
	if got, err := a.ReadVolumeFile(ctx, "data", "secret.txt"); err != nil || string(got) != "acme-only" {
		t.Fatalf("acme reads %q %v", got, err)
	}
	_, err = a.CreateVolume(ctx, "more", 2<<20)
	wantVolCode(t, "acme past its volume quota", err, api.CodeConflict, "max_volume_mb", "3 MiB")
	if _, err := a.CreateVolume(ctx, "small", 1<<20); err != nil {
		t.Fatalf("acme within its quota: %v", err)
	}
	runOnly, _ := tenantClient(t, url, keys, "acme", auth.ScopeRun)
	_, err = runOnly.Volumes(ctx)
	wantCode(t, "a key without the files scope", err, api.CodeForbidden)
}

// A heavy session with a volume pauses and resumes with its files (its lease held while it is
// paused, so no other session or the files API writes the volume meanwhile); a fork of a session
// holding a volume read-write is a conflict (a second writer), a fork of a read-only holder
// mounts it read-only too, with a lease of its own.
func TestDaemonHeavyVolumePauseFork(t *testing.T) {
	c, _ := volumeDaemon(t, t.TempDir())
	ctx := context.Background()
	if _, err := c.CreateVolume(ctx, "data", 8<<20); err != nil {
		t.Fatal(err)
	}
	s, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "heavy", Volumes: map[string]string{"data": "/mnt/data"}})
	if err != nil {
		t.Fatal(err)
	}
	step := runIn(t, c, s.ID, "fh = open('/mnt/data/a.txt', 'w')\nfh.write('before the pause'); fh.flush()").Step
	if _, err := c.Pause(ctx, s.ID); err != nil {
		t.Fatalf("pause with a volume: %v", err)
	}
	err = c.WriteVolumeFile(ctx, "data", "a.txt", []byte("x"))
	wantVolCode(t, "files API write while paused", err, "conflict")
	if v, err := c.Volume(ctx, "data"); err != nil || v.MountedRW != 1 {
		t.Fatalf("a paused session's volume: %+v %v", v, err)
	}
	if res := runIn(t, c, s.ID, "fh.write(', after'); fh.close()\nprint(open('/mnt/data/a.txt').read())"); res.Stdout != "before the pause, after\n" {
		t.Fatalf("after resume: %q %q", res.Stdout, res.Stderr)
	}
	_, err = c.Fork(ctx, s.ID, step)
	wantVolCode(t, "fork of a read-write holder", err, "conflict", "data", "read-only")
	if err := c.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}

	r, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "heavy", Volumes: map[string]string{"data": "/data:ro"}})
	if err != nil {
		t.Fatal(err)
	}
	step = runIn(t, c, r.ID, "v = open('/data/a.txt').read()").Step
	f, err := c.Fork(ctx, r.ID, step)
	if err != nil {
		t.Fatalf("fork of a read-only holder: %v", err)
	}
	if v, err := c.Volume(ctx, "data"); err != nil || v.MountedRO != 2 {
		t.Fatalf("after the fork: %+v %v", v, err)
	}
	if res := runIn(t, c, f.ID, "print(v, open('/data/a.txt').read())"); res.Stdout != "before the pause, after before the pause, after\n" {
		t.Fatalf("fork: %q %q", res.Stdout, res.Stderr)
	}
	if err := c.CloseSession(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Volume(ctx, "data"); err != nil || v.MountedRO != 1 {
		t.Fatalf("after the fork's close: %+v %v", v, err)
	}
}
