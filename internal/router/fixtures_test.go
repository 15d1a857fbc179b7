package router

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/rootfs"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The router's tests run against snapshots of what the real builds offer, so they need neither
// the builds nor root: testdata/nano-modules.json is DATA/nano/modules.json as `agentbox setup`
// probed it, and testdata/images.json the default heavy image with the modules its files show.
// Refresh both from this machine's builds with
//
//	go test ./internal/router -run TestFixtures -update
var update = flag.Bool("update", false, "rewrite testdata/nano-modules.json and testdata/images.json from the builds in the data directory")

func TestFixtures(t *testing.T) {
	if !*update {
		t.Skip("pass -update to rewrite the fixtures from this machine's builds")
	}
	data := config.DefaultDataDir()
	mods, err := nano.ReadModules(nano.Artifacts{Dir: filepath.Join(data, "nano")})
	if err != nil {
		t.Fatal(err)
	}
	writeJSON(t, "testdata/nano-modules.json", mods)
	img, err := rootfs.Store{Dir: filepath.Join(data, "heavy", "images")}.Get("python-datascience")
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Modules()
	if err != nil {
		t.Fatal(err)
	}
	writeJSON(t, "testdata/images.json", []sandbox.ImageInfo{{Name: img.Manifest.Name, Hash: img.Manifest.Hash, Default: true,
		Python: img.Manifest.PythonVersion, Modules: m}})
}

func writeJSON(t *testing.T, path string, v any) {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The tiers' names, as the wiring gives them.
const (
	nanoTier  sandbox.Tier = "nano"
	heavyTier sandbox.Tier = "heavy"
)

var testNames = Names{Fixed: nanoTier, Images: heavyTier}

// fixtureOptions builds router options from the snapshots.
func fixtureOptions(t testing.TB) Options {
	t.Helper()
	var mods nano.ModuleList
	readJSON(t, "testdata/nano-modules.json", &mods)
	var imgs []sandbox.ImageInfo
	readJSON(t, "testdata/images.json", &imgs)
	return Options{
		Names:   testNames,
		Nano:    NanoModules{Version: mods.Version, Available: mods.Available, Unavailable: mods.Unavailable},
		Images:  func() []sandbox.ImageInfo { return imgs },
		NanoMax: sandbox.Limits{MemoryBytes: 2 << 30, FilesBytes: 336 << 20},
	}
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}
