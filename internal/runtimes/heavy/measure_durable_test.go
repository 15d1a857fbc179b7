package heavy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/snapstore"
)

// TestMeasureDurableSplit says where a latest step's durable checkpoint holds a pandas session
// (a 100,000 x 6 DataFrame): the agentbox side's parts (DurableParts) and, with
// AGENTBOX_HEAVY_MEASURE_DEBUG=1, the sentry's own save timings from its debug log. Set
// AGENTBOX_HEAVY_MEASURE=1.
func TestMeasureDurableSplit(t *testing.T) {
	measuring(t)
	logs := t.TempDir()
	if d := os.Getenv("AGENTBOX_HEAVY_MEASURE_DEBUG"); d != "" {
		if d != "1" {
			logs = d // kept
		}
		runscExtraFlags = []string{"--debug", "--debug-log=" + logs + "/", "--profile"}
		defer func() { runscExtraFlags = nil }()
	}
	store, err := snapstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rt := ttRuntime(t, Options{Snapshots: store, DurableQuiet: 50 * time.Millisecond, Warm: 1})
	ctx := context.Background()
	s := ttSession(t, rt)
	out(t, s, "import numpy as np, pandas as pd\ndf = pd.DataFrame(np.random.rand(100000, 6), columns=list('abcdef'))")
	// AGENTBOX_HEAVY_MEASURE_PROFILE=FILE: a CPU profile of the sentry over the timed checkpoints.
	prof := os.Getenv("AGENTBOX_HEAVY_MEASURE_PROFILE")
	n := 8
	if v, err := strconv.Atoi(os.Getenv("AGENTBOX_HEAVY_MEASURE_N")); err == nil {
		n = v
	}
	var profDone chan struct{}
	for i := 0; i < n; i++ {
		if i == 1 && prof != "" {
			profDone = make(chan struct{})
			go func() {
				defer close(profDone)
				b, err := rt.runsc.command(ctx, rt.runscFlags(s.b.limits), "debug", "--profile-cpu="+prof, "--duration=4s", s.b.id).CombinedOutput()
				t.Logf("profile: %v %s", err, b)
			}()
			time.Sleep(200 * time.Millisecond)
		}
		out(t, s, fmt.Sprintf("df['a'] = df['a'] + %d\nr = df.describe()", i))
		step := fmt.Sprintf("st_%d", i)
		if err := s.Snapshot(ctx, step); err != nil {
			t.Fatal(err)
		}
		if ref, err := s.Persist(ctx, step); err != nil || ref.Ref == "" {
			t.Fatalf("persist: %+v %v", ref, err)
		}
	}
	if profDone != nil {
		<-profDone
	}
	c := rt.DurableCosts()
	for i, p := range c.Parts {
		t.Logf("checkpoint %d: held %v (lock %v, prepare %v, volumes %v, runsc %v), scrub %v, store %v, total %v, %d MB",
			i, c.Held[i].Round(time.Millisecond), p.Lock.Round(time.Millisecond), p.Prepare.Round(time.Millisecond), p.Volumes.Round(time.Millisecond),
			p.Runsc.Round(time.Millisecond), p.Scrub.Round(time.Millisecond), p.Store.Round(time.Millisecond), c.Total[i].Round(time.Millisecond), c.Bytes[i]>>20)
	}
	re := regexp.MustCompile(`(save took|Memory files save took|Kernel save took|CPUID save took|Overall save took|Pausing root network namespace took|Kernel save stats|MemoryFile\(.*\) save|materializ|[Tt]emplate|checkpoint|Checkpoint|quiesce|Resum|resum)`)
	_ = filepath.Walk(logs, func(p string, info os.FileInfo, err error) error {
		if err != nil || !info.Mode().IsRegular() {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, l := range strings.Split(string(b), "\n") {
			if re.MatchString(l) && len(l) < 400 {
				t.Logf("%s: %s", filepath.Base(p), l)
			}
		}
		return nil
	})
}
