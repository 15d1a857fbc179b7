package daemon_test

import (
	"context"
	"errors"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// Routing end to end, the heavy tier off: the router built from the module list setup probed.
func TestDaemonRouting(t *testing.T) {
	c, _ := start(t)
	ctx := context.Background()

	t.Run("StdlibToNano", func(t *testing.T) {
		res, err := c.Run(ctx, api.RunRequest{Code: "import json, re\nprint(json.dumps(re.findall('a', 'banana')))\n"})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"nano: imports only json, re (all in nano)"}
		if res.Runtime != "nano" || res.Stdout != "[\"a\", \"a\", \"a\"]\n" || !slices.Equal(res.Routing.Reasons, want) {
			t.Fatalf("got %+v, want nano with %q", res, want)
		}
	})

	t.Run("SyntaxErrorWithoutSandbox", func(t *testing.T) {
		res, err := c.Run(ctx, api.RunRequest{Code: "import json\nprint(json.dumps(1)\n"})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 1 || res.Error == nil || res.Error.Name != "SyntaxError" || res.Error.Value != "'(' was never closed (line 2, column 6)" {
			t.Fatalf("got %+v", res)
		}
		if !strings.Contains(res.Error.Traceback, "File \"<string>\", line 2") || res.Stderr != res.Error.Traceback {
			t.Errorf("traceback %q, stderr %q", res.Error.Traceback, res.Stderr)
		}
		if !slices.Equal(res.Routing.Reasons, []string{"nano: SyntaxError at line 2, column 6 (not run)"}) || res.Timings.TotalMS != 0 {
			t.Errorf("routing %+v, timings %+v: want no sandbox", res.Routing, res.Timings)
		}
	})

	t.Run("NanoRequestedWithPandas", func(t *testing.T) {
		_, err := c.Run(ctx, api.RunRequest{Code: "import pandas as pd\n", Runtime: "nano"})
		var e *client.Error
		if !errors.As(err, &e) || e.Code != "invalid_request" || !strings.Contains(e.Message, "cannot import pandas (line 1)") {
			t.Fatalf("got %v, want invalid_request naming the import", err)
		}
	})

	t.Run("PandasWithoutHeavyTier", func(t *testing.T) {
		res, err := c.Run(ctx, api.RunRequest{Code: "import pandas\n"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Runtime != "nano" || res.Error == nil || res.Error.Name != "ModuleNotFoundError" ||
			!strings.Contains(strings.Join(res.Routing.Reasons, "\n"), "this daemon runs no heavy tier") {
			t.Fatalf("got %+v", res)
		}
	})
}

// Routing between the tiers: imports nano lacks go to heavy, and an import the router cannot see
// is retried there after nano's ModuleNotFoundError.
func TestDaemonHeavyRouting(t *testing.T) {
	c := startHeavy(t)
	ctx := context.Background()

	t.Run("ImportsToHeavy", func(t *testing.T) {
		res, err := c.Run(ctx, api.RunRequest{Code: "import pandas as pd\nprint(pd.Series([1, 2]).sum())\n", Timeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"heavy: imports pandas (not in nano; in image python-datascience)"}
		if res.Runtime != "heavy" || res.Stdout != "3\n" || !slices.Equal(res.Routing.Reasons, want) {
			t.Fatalf("got %+v, want heavy with %q", res, want)
		}
	})

	t.Run("DynamicImportRetriedInHeavy", func(t *testing.T) {
		res, err := c.Run(ctx, api.RunRequest{Code: "m = __import__('pan' + 'das')\nprint(m.__name__)\n", Timeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			"nano: no imports",
			"nano: 1 dynamic import(s) the router cannot read (a ModuleNotFoundError in nano is retried in heavy)",
			"heavy: retried after ModuleNotFoundError: No module named 'pandas' in nano",
		}
		if res.Runtime != "heavy" || res.Stdout != "pandas\n" || !slices.Equal(res.Routing.Reasons, want) {
			t.Fatalf("got %+v\nwant heavy with %q", res, want)
		}
	})

	t.Run("HeavyRequested", func(t *testing.T) {
		res, err := c.Run(ctx, api.RunRequest{Code: "import json\nprint(json.dumps(1))\n", Runtime: "heavy", Timeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		if res.Runtime != "heavy" || !slices.Equal(res.Routing.Reasons, []string{"heavy: runtime requested"}) {
			t.Fatalf("got %+v", res)
		}
	})
}

// A data directory whose module list is missing (a build installed before the list existed, or
// rebuilt by hand): the daemon probes the build in its own workers at start and keeps the list.
func TestDaemonMakesMissingModuleList(t *testing.T) {
	testenv.RequireRoot(t)
	src := nano.Artifacts{Dir: nano.Dir(config.Default())}
	if err := src.Check(); err != nil {
		testenv.Skip(t, err.Error())
	}
	cfg := config.Default()
	cfg.Sessions.Dir = t.TempDir() // sessions that outlive the daemon: this test's own
	cfg.DataDir = t.TempDir()
	mustConfigure(t, heavy.Configure(&cfg, func(h *heavy.Config) { h.Enabled = heavy.Off }))
	cfg.ArtifactsDir = t.TempDir()
	a := nano.Artifacts{Dir: nano.Dir(cfg)}
	// Link the installed build and its compilation cache, all but the module list.
	err := filepath.WalkDir(src.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src.Dir, p)
		dst := filepath.Join(a.Dir, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case rel == nano.ModulesFile:
			return nil
		}
		return linkOrCopy(p, dst)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cfg.DataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := daemon.NewManager(context.Background(), cfg, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	list, err := nano.ReadModules(a)
	if err != nil {
		t.Fatalf("no module list after start: %v", err)
	}
	if !slices.Contains(list.Available, "json") || slices.Contains(list.Available, "ssl") {
		t.Errorf("list of %d modules: json expected, ssl not", len(list.Available))
	}
	res, err := m.Run(context.Background(), &sandbox.RunRequest{Code: "import json\nprint(json.dumps(1))\n"})
	if err != nil || res.Stdout != "1\n" || !slices.Equal(res.Routing.Reasons, []string{"nano: imports only json (all in nano)"}) {
		t.Fatalf("got %+v, %v", res, err)
	}
}

// linkOrCopy links src to dst, or copies it where a link cannot cross file systems.
func linkOrCopy(src, dst string) error {
	if os.Link(src, dst) == nil {
		return nil
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
