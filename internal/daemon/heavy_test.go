package daemon_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// startHeavy starts a daemon with both tiers, the heavy one required.
func startHeavy(t *testing.T) *client.Client {
	t.Helper()
	testenv.RequireRoot(t)
	l := heavy.LayoutFor(config.DefaultDataDir())
	if _, err := os.Stat(l.Runsc(heavy.RunscVersion)); err != nil {
		testenv.Skip(t, "no runsc at "+l.Runsc(heavy.RunscVersion)+": run `agentbox setup`")
	}
	if _, err := l.Images().Get("python-datascience"); err != nil {
		testenv.Skip(t, err.Error())
	}
	warm := 1
	c, _ := startWith(t, func(c *config.Config) {
		mustConfigure(t, heavy.Configure(c, func(h *heavy.Config) { h.Enabled, h.Warm = heavy.On, &warm }))
	})
	return c
}

func TestDaemonHeavy(t *testing.T) {
	c := startHeavy(t)
	ctx := context.Background()

	t.Run("PackagesRouteToHeavy", func(t *testing.T) {
		res, err := c.Run(ctx, api.RunRequest{Code: "import pandas as pd\nprint(pd.DataFrame({'a': [1, 2]}).a.sum())\n", Packages: []string{"pandas"}, Timeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != "3\n" || res.Runtime != "heavy" || !strings.Contains(strings.Join(res.Routing.Reasons, " "), "pandas") {
			t.Fatalf("got %+v", res)
		}
	})

	t.Run("UnknownPackage", func(t *testing.T) {
		_, err := c.Run(ctx, api.RunRequest{Code: "print(1)", Packages: []string{"pandas", "no-such-package-xyz"}})
		var e *client.Error
		if !errors.As(err, &e) || e.Code != "invalid_request" || !strings.Contains(e.Message, "no-such-package-xyz") ||
			!strings.Contains(e.Message, "python-datascience") || !strings.Contains(e.Message, "pandas") {
			t.Fatalf("got %v", err)
		}
	})

	t.Run("NanoWithPackages", func(t *testing.T) {
		_, err := c.Run(ctx, api.RunRequest{Code: "print(1)", Runtime: "nano", Packages: []string{"pandas"}})
		var e *client.Error
		if !errors.As(err, &e) || e.Code != "invalid_request" {
			t.Fatalf("got %v", err)
		}
	})

	t.Run("Images", func(t *testing.T) {
		imgs, err := c.Images(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(imgs) == 0 || imgs[0].Name != "python-datascience" || !imgs[0].Default || imgs[0].Packages["pandas"] == "" || imgs[0].Packages["numpy"] == "" {
			t.Fatalf("got %+v", imgs)
		}
	})

	t.Run("SessionFiles", func(t *testing.T) {
		s, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "heavy"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseSession(ctx, s.ID)
		if err := c.WriteFile(ctx, s.ID, "data/in.csv", []byte("x,y\n1,2\n3,4\n")); err != nil {
			t.Fatal(err)
		}
		res, err := c.RunInSession(ctx, s.ID, api.RunRequest{Code: "import pandas as pd\ndf = pd.read_csv('data/in.csv')\ndf['z'] = df.x * df.y\ndf.to_csv('out.csv', index=False)\n", Timeout: 60})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("run: %+v %v", res, err)
		}
		b, err := c.ReadFile(ctx, s.ID, "/home/user/out.csv")
		if err != nil || string(b) != "x,y,z\n1,2,2\n3,4,12\n" {
			t.Fatalf("read: %q %v", b, err)
		}
		list, err := c.ListFiles(ctx, s.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, f := range list {
			paths = append(paths, f.Path)
		}
		if got := strings.Join(paths, " "); !strings.Contains(got, "/home/user/data/in.csv") || !strings.Contains(got, "/home/user/out.csv") {
			t.Errorf("list: %s", got)
		}
		if err := c.RemoveFile(ctx, s.ID, "data"); err != nil {
			t.Fatal(err)
		}
		var e *client.Error
		if _, err := c.ReadFile(ctx, s.ID, "data/in.csv"); !errors.As(err, &e) || e.Code != "not_found" {
			t.Errorf("read after remove: %v", err)
		}
		if _, err := c.ReadFile(ctx, s.ID, "../../etc/passwd"); !errors.As(err, &e) || e.Code != "invalid_request" {
			t.Errorf("path escape: %v", err)
		}
		if err := c.WriteFile(ctx, s.ID, "", []byte("x")); !errors.As(err, &e) || e.Code != "invalid_request" {
			t.Errorf("no path: %v", err)
		}
	})

	t.Run("NanoSessionHasNoFileOps", func(t *testing.T) {
		s, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "nano"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseSession(ctx, s.ID)
		var e *client.Error
		if err := c.WriteFile(ctx, s.ID, "a.txt", []byte("x")); !errors.As(err, &e) || e.Code != "invalid_request" || e.Hint == "" {
			t.Errorf("got %v", err)
		}
	})

	t.Run("SessionImageIsFixed", func(t *testing.T) {
		s, err := c.CreateSession(ctx, api.CreateSessionRequest{Packages: []string{"numpy"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseSession(ctx, s.ID)
		if s.Runtime != "heavy" {
			t.Fatalf("a session asking for numpy runs %s", s.Runtime)
		}
		_, err = c.RunInSession(ctx, s.ID, api.RunRequest{Code: "print(1)", Packages: []string{"no-such-package-xyz"}})
		var e *client.Error
		if !errors.As(err, &e) || e.Code != "invalid_request" {
			t.Errorf("got %v", err)
		}
	})

	// The files API over HTTP meets a link the session's code planted: it reads nothing outside
	// the session's directories and writes nothing there.
	t.Run("FilesRefusePlantedLinks", func(t *testing.T) {
		s, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "heavy"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseSession(ctx, s.ID)
		plant := "import os\nos.symlink('/etc/shadow', 'shadow')\nos.symlink('/etc', 'etc')\nprint('planted')\n"
		if res, err := c.RunInSession(ctx, s.ID, api.RunRequest{Code: plant}); err != nil || res.Stdout != "planted\n" {
			t.Fatalf("planting: %+v %v", res, err)
		}
		var e *client.Error
		if b, err := c.ReadFile(ctx, s.ID, "shadow"); !errors.As(err, &e) || e.Code != "invalid_request" {
			t.Errorf("reading the planted link to /etc/shadow: %q %v, want invalid_request", b, err)
		}
		if err := c.WriteFile(ctx, s.ID, "etc/agentbox-owned", []byte("x")); !errors.As(err, &e) || e.Code != "invalid_request" {
			t.Errorf("writing through the planted link to /etc: %v, want invalid_request", err)
		}
		if err := c.WriteFile(ctx, s.ID, "/etc/agentbox-owned", []byte("x")); !errors.As(err, &e) || e.Code != "invalid_request" {
			t.Errorf("writing to /etc: %v, want invalid_request", err)
		}
		res, err := c.RunInSession(ctx, s.ID, api.RunRequest{Code: "import os\nprint(os.path.exists('/etc/agentbox-owned'))\n"})
		if err != nil || res.Stdout != "False\n" {
			t.Errorf("a file landed in /etc: %+v %v", res, err)
		}
	})
}
