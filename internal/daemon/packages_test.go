package daemon_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/egress"
	"github.com/agentbox-dev/agentbox/internal/rootfs"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// buildWheel makes a pure-Python wheel: the module NAME with __init__.py, and the dist-info
// pip reads (METADATA, WHEEL, RECORD with each file's hash).
func buildWheel(t *testing.T, name, version, init string, requires ...string) (string, []byte) {
	t.Helper()
	di := fmt.Sprintf("%s-%s.dist-info", name, version)
	meta := fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version)
	for _, r := range requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	files := [][2]string{
		{name + "/__init__.py", init},
		{di + "/METADATA", meta},
		{di + "/WHEEL", "Wheel-Version: 1.0\nGenerator: agentbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := z.Create(f[0])
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f[1]))
		sum := sha256.Sum256([]byte(f[1]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(f[1]))
	}
	record.WriteString(di + "/RECORD,,\n")
	w, _ := z.Create(di + "/RECORD")
	w.Write([]byte(record.String()))
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s-%s-py3-none-any.whl", name, version), buf.Bytes()
}

// pkgIndex is a PEP 503 simple index of the test's wheels, served over HTTPS from a network
// namespace of the test's own; it records the projects asked for and can be stopped.
type pkgIndex struct {
	mu     sync.Mutex
	asked  []string
	down   bool
	wheels map[string][]byte // file name -> content, by project (the name before the first -)
}

func (x *pkgIndex) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x.mu.Lock()
	x.asked = append(x.asked, r.URL.Path)
	down := x.down
	x.mu.Unlock()
	if down {
		http.Error(w, "index stopped", http.StatusServiceUnavailable)
		return
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/simple/"):
		project := strings.Trim(strings.TrimPrefix(r.URL.Path, "/simple/"), "/")
		var links []string
		for n, data := range x.wheels {
			if strings.ReplaceAll(strings.SplitN(n, "-", 2)[0], "_", "-") == project {
				sum := sha256.Sum256(data)
				links = append(links, fmt.Sprintf(`<a href="/files/%s#sha256=%x">%s</a>`, n, sum, n))
			}
		}
		if len(links) == 0 {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<!DOCTYPE html><html><body>%s</body></html>", strings.Join(links, "\n"))
	case strings.HasPrefix(r.URL.Path, "/files/"):
		data, ok := x.wheels[strings.TrimPrefix(r.URL.Path, "/files/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(data)
	default:
		http.NotFound(w, r)
	}
}

const pkgProfiles = `
name: test-pkgs
allow:
  - domain: pypi.mirror.test
`

const noPkgProfile = `
name: test-nopkgs
allow:
  - domain: api.allowed.test
`

// TestPackagesOnDemand: a package no image has, served only by the test's index, is installed in
// the session's sandbox through the gateway and imported by the next cell; a second session of
// the same daemon gets it from the wheel cache with the index stopped; a profile that does not
// allow the index is a policy_violation naming it, and a package the index lacks is an error
// naming the package.
func TestPackagesOnDemand(t *testing.T) {
	testenv.RequireRoot(t)
	dataDir := config.DefaultDataDir()
	l := heavy.LayoutFor(dataDir)
	if _, err := os.Stat(l.Runsc(heavy.RunscVersion)); err != nil {
		testenv.Skip(t, "no runsc: run `agentbox setup`")
	}
	imgs, _ := l.Images().List()
	if i := slices.IndexFunc(imgs, func(img rootfs.Image) bool { return img.Manifest.Name == "python-datascience" }); i < 0 || !imgs[i].Manifest.Has("pip") {
		testenv.Skip(t, "the python-datascience image has no pip: run `agentbox image build python-datascience`")
	}
	host := testenv.NewPublicHost(t)
	idx := &pkgIndex{wheels: map[string][]byte{}}
	n, data := buildWheel(t, "agentboxdemo", "1.0", "from agentboxdep import BASE\nVALUE = BASE + 1\n", "agentboxdep")
	idx.wheels[n] = data
	n, data = buildWheel(t, "agentboxdep", "2.0", "BASE = 41\n")
	idx.wheels[n] = data
	public, err := egress.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "upstream.pem")
	os.WriteFile(caFile, public.CertPEM, 0o644)
	srv := &http.Server{Handler: idx, TLSConfig: &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) { return public.Leaf(h.ServerName) }}}
	go srv.ServeTLS(host.Listen(t, 443), "", "")
	t.Cleanup(func() { srv.Close() })
	profiles := t.TempDir()
	os.WriteFile(filepath.Join(profiles, "test-pkgs.yaml"), []byte(pkgProfiles), 0o644)
	os.WriteFile(filepath.Join(profiles, "test-nopkgs.yaml"), []byte(noPkgProfile), 0o644)
	warm := 1
	c, _ := startWith(t, func(c *config.Config) {
		mustConfigure(t, heavy.Configure(c, func(h *heavy.Config) {
			h.Enabled, h.Warm, h.PackageIndex = heavy.On, &warm, "https://pypi.mirror.test/simple"
		}))
		c.Egress.Dir = t.TempDir()
		c.Egress.ProfilesDir = profiles
		c.Egress.UpstreamCAFile = caFile
		c.Egress.Hosts = map[string][]string{"pypi.mirror.test": {host.Addr}}
	})
	ctx := context.Background()
	session := func(pkgs []string, profile string) (*api.Session, error) {
		s, err := c.CreateSession(ctx, api.CreateSessionRequest{Packages: pkgs, EgressProfile: profile})
		if err == nil {
			t.Cleanup(func() { c.CloseSession(ctx, s.ID) })
		}
		return s, err
	}
	use := func(id string) *api.Result {
		t.Helper()
		res, err := c.RunInSession(ctx, id, api.RunRequest{Code: "import agentboxdemo\nprint(agentboxdemo.VALUE)\n", Timeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		if res.Error != nil || strings.TrimSpace(res.Stdout) != "42" {
			t.Fatalf("import after install: %q %+v", res.Stdout, res.Error)
		}
		return res
	}
	reasons := func(res *api.Result) string {
		return strings.Join(res.Routing.Reasons, "; ")
	}

	// The baseline for the install times logged below: a session that installs nothing.
	start := time.Now()
	if _, err := session(nil, "test-pkgs"); err != nil {
		t.Fatal(err)
	}
	t.Logf("session without packages: %s", time.Since(start))

	// From the index, through the gateway, into the session; the next cell imports it.
	start = time.Now()
	s1, err := session([]string{"agentboxdemo"}, "test-pkgs")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cold install (index): %s", time.Since(start))
	if s1.Runtime != "heavy" {
		t.Fatalf("runtime %s", s1.Runtime)
	}
	res := use(s1.ID)
	if r := reasons(res); !strings.Contains(r, "https://pypi.mirror.test/simple") || !strings.Contains(r, "agentboxdep-2.0-py3-none-any.whl") {
		t.Fatalf("routing reasons do not say where the packages came from: %q", r)
	}
	// The code itself has no network it did not ask for.
	if res, err := c.RunInSession(ctx, s1.ID, api.RunRequest{Code: "import os\nprint(os.environ.get('HTTPS_PROXY', 'none'))\n", Timeout: 30}); err != nil || strings.TrimSpace(res.Stdout) != "none" {
		t.Fatalf("the session's code got the proxy: %v %+v", err, res)
	}

	// From the cache, with the index stopped.
	idx.mu.Lock()
	idx.down, idx.asked = true, nil
	idx.mu.Unlock()
	start = time.Now()
	s2, err := session([]string{"agentboxdemo"}, "test-pkgs")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("warm install (cache): %s", time.Since(start))
	res = use(s2.ID)
	if r := reasons(res); !strings.Contains(r, "wheel cache") {
		t.Fatalf("routing reasons do not name the cache: %q", r)
	}
	idx.mu.Lock()
	asked := idx.asked
	idx.mu.Unlock()
	if len(asked) > 0 {
		t.Fatalf("the cached install asked the index: %v", asked)
	}

	// A one-shot run with the package, from the cache too.
	run, err := c.Run(ctx, api.RunRequest{Code: "import agentboxdemo\nprint(agentboxdemo.VALUE)\n", Packages: []string{"agentboxdemo"}, EgressProfile: "test-pkgs", Timeout: 60})
	if err != nil || strings.TrimSpace(run.Stdout) != "42" || !strings.Contains(reasons(run), "wheel cache") {
		t.Fatalf("one-shot run: %v %+v", err, run)
	}

	// A profile that does not allow the index: policy_violation naming it.
	var e *client.Error
	if _, err := session([]string{"agentboxdemo"}, "test-nopkgs"); !errors.As(err, &e) || e.Code != "policy_violation" || !strings.Contains(e.Message, "pypi.mirror.test") {
		t.Fatalf("a profile without the index: %v", err)
	}

	// A package the index does not have: an error naming it.
	idx.mu.Lock()
	idx.down = false
	idx.mu.Unlock()
	if _, err := session([]string{"no-such-agentbox-pkg"}, "test-pkgs"); !errors.As(err, &e) || e.Code != "invalid_request" || !strings.Contains(e.Message, "no-such-agentbox-pkg") {
		t.Fatalf("a package the index lacks: %v", err)
	}

	// A one-shot run installs from the index too, and its code has no network it did not ask for.
	run, err = c.Run(ctx, api.RunRequest{Code: "import os, agentboxdep\nprint(agentboxdep.BASE, os.environ.get('HTTPS_PROXY', 'none'))\n",
		Packages: []string{"agentboxdep"}, EgressProfile: "test-pkgs", Timeout: 60})
	if err != nil || strings.TrimSpace(run.Stdout) != "41 none" || !strings.Contains(reasons(run), "https://pypi.mirror.test/simple") {
		t.Fatalf("one-shot run from the index: %v %+v", err, run)
	}
}
