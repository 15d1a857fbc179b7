package cli_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/internal/config"
	heavyConfig "github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// A local engine starts the heavy tier only for code that may need it: code importing what the
// nano build lacks, by the module list setup made; without a list the engine decides.
func TestRunLocalStartsHeavyOnlyWhenNeeded(t *testing.T) {
	data := t.TempDir()
	a := nano.Artifacts{Dir: filepath.Join(data, "nano")}
	if err := os.MkdirAll(a.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a.Wasm(), []byte("a build"), 0o644); err != nil {
		t.Fatal(err)
	}
	build, err := a.BuildHashes()
	if err != nil {
		t.Fatal(err)
	}
	list := nano.ModuleList{Build: build, Version: [3]int{3, 11, 2}, Available: []string{"json", "sys"}}
	var heavy string
	factory := func(_ context.Context, cfg config.Config, _ *slog.Logger) (*sandbox.Audited, error) {
		hc, err := heavyConfig.ConfigFrom(cfg)
		if err != nil {
			t.Fatal(err)
		}
		heavy = hc.Enabled
		return newFakeManager(t), nil
	}
	for _, tc := range []struct {
		name, code string
		noList     bool
		want       string
	}{
		{"stdlib", "import json\nprint(json.dumps(1))\n", false, heavyConfig.Off},
		{"pandas", "import sys\nimport pandas as pd\n", false, heavyConfig.Auto},
		{"pandas in a string", "s = 'import pandas'\n", false, heavyConfig.Off},
		{"no module list", "import json\n", true, heavyConfig.Auto},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(a.Modules())
			if !tc.noList {
				if err := nano.WriteModules(a, list); err != nil {
					t.Fatal(err)
				}
			}
			got := runCLI(t, cli.RunOptions{File: "-", Stdin: strings.NewReader(tc.code), Local: true, DataDir: data, NewManager: factory})
			if got.code != 0 || heavy != tc.want {
				t.Errorf("heavy %q (exit %d, %s), want %q", heavy, got.code, got.stderr, tc.want)
			}
		})
	}
}
