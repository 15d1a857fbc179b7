package bench

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

func TestPackagesFlags(t *testing.T) {
	t.Parallel()
	for want, args := range map[string][]string{
		"at least 1":           {"packages", "-n", "0"},
		"unexpected arguments": {"packages", "more"},
		"not defined":          {"packages", "-bogus"},
	} {
		var out bytes.Buffer
		if err := Main(context.Background(), args, &out); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Main(%q) = %v, want an error containing %q", args, err, want)
		}
	}
}

// The report: the added time and the ratio against the session that installs nothing.
func TestPackagesReport(t *testing.T) {
	t.Parallel()
	r := &PackagesReport{Started: time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC), Settings: PackagesOptions{N: 5},
		Machine: PackagesMachine{Host: Host{CPUs: 2}, Image: "8e5f2891cba9aaaa", Load: "1.00 1.00 1.00"}}
	r.Rows = []Row{
		{Group: pgSession, Name: pkgRowNone, Base: true, Stats: &Summary{N: 5, Median: 20, P99: 30, Min: 15}},
		{Group: pgSession, Name: pkgRowCold, Stats: &Summary{N: 5, Median: 4020, P99: 5000, Min: 3700}},
		{Group: pgSession, Name: pkgRowWarm, Error: "boom"},
	}
	r.finish(func(*PackagesReport) []Target { return nil })
	if r.Failed != 1 {
		t.Fatalf("failed %d", r.Failed)
	}
	var out bytes.Buffer
	writePackagesReport(&out, r)
	for _, want := range []string{"## agentbox bench packages", "| +4000 | 201.0x |", "boom", "image 8e5f2891cba9;", "(baseline)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// The bench end to end on real gVisor, one round: every row has a figure, none failed (the cold
// install named the index, the warm one the wheel cache).
func TestPackagesRows(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireTool(t, "ip")
	dd := config.DefaultDataDir()
	l := heavy.LayoutFor(dd)
	if _, err := os.Stat(l.Runsc(heavy.RunscVersion)); err != nil {
		testenv.Skip(t, "no runsc: run `agentbox setup`")
	}
	if img, err := l.Images().Get("python-datascience"); err != nil || !img.Manifest.Has("pip") {
		testenv.Skip(t, "the python-datascience image has no pip: run `agentbox image build python-datascience`")
	}
	rep, err := RunPackages(context.Background(), PackagesOptions{N: 1, DataDir: dd, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed != 0 || len(rep.Rows) != 3 {
		t.Fatalf("failed %d, rows %+v", rep.Failed, rep.Rows)
	}
	for _, r := range rep.Rows {
		if r.Stats == nil || r.Stats.N != 1 || r.Stats.Median <= 0 {
			t.Errorf("row %q has no figure: %+v", r.Name, r)
		}
	}
}
