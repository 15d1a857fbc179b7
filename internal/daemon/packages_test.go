package daemon_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/egress"
	"github.com/agentbox-dev/agentbox/internal/pkgindex"
	"github.com/agentbox-dev/agentbox/internal/rootfs"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

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
// allow the index is a policy_violation naming it, a package the index lacks is an error
// naming the package, and an index the gateway cannot reach is an error that says so and why.
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
	idx := &pkgindex.Index{}
	if err := idx.Add("agentboxdemo", "1.0", "from agentboxdep import BASE\nVALUE = BASE + 1\n", "agentboxdep"); err != nil {
		t.Fatal(err)
	}
	if err := idx.Add("agentboxdep", "2.0", "BASE = 41\n"); err != nil {
		t.Fatal(err)
	}
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
	idx.SetDown(true)
	askedBefore := len(idx.Asked())
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
	if asked := idx.Asked()[askedBefore:]; len(asked) > 0 {
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
	idx.SetDown(false)
	if _, err := session([]string{"no-such-agentbox-pkg"}, "test-pkgs"); !errors.As(err, &e) || e.Code != "invalid_request" || !strings.Contains(e.Message, "no-such-agentbox-pkg") {
		t.Fatalf("a package the index lacks: %v", err)
	}

	// A one-shot run installs from the index too, and its code has no network it did not ask for.
	run, err = c.Run(ctx, api.RunRequest{Code: "import os, agentboxdep\nprint(agentboxdep.BASE, os.environ.get('HTTPS_PROXY', 'none'))\n",
		Packages: []string{"agentboxdep"}, EgressProfile: "test-pkgs", Timeout: 60})
	if err != nil || strings.TrimSpace(run.Stdout) != "41 none" || !strings.Contains(reasons(run), "https://pypi.mirror.test/simple") {
		t.Fatalf("one-shot run from the index: %v %+v", err, run)
	}

	// The index unreachable (its server stopped): the error names that and why, not a package
	// the index lacks (pip says only that it found no version).
	srv.Close()
	if _, err := session([]string{"agentboxother"}, "test-pkgs"); !errors.As(err, &e) || e.Code != "runtime_unavailable" ||
		!strings.Contains(e.Message, "could not reach the package index") || !strings.Contains(e.Message, "connection refused") {
		t.Fatalf("the index unreachable: %v", err)
	}
}
