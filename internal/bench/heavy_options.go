package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/agentbox-dev/agentbox/internal/config"
)

// HeavyOptions are the settings of `agentbox bench heavy`. Zero values take the documented
// defaults.
type HeavyOptions struct {
	// N is the number of timed runs of each session-start scenario served warm or by a restore.
	// Default 50.
	N int `json:"n"`
	// NBoot is the number of timed runs of the scenarios served by a boot (~1.5 s each with the
	// pandas import). Default 10.
	NBoot int `json:"n_boot"`
	// Cells is the number of timed cells in a warm session. Default 200.
	Cells int `json:"cells"`
	// Refill is how many sandboxes the refill scenarios make from an empty pool, and RefillReps
	// how often. Default 8 and 5 (3 for the boot path).
	Refill     int `json:"refill"`
	RefillReps int `json:"refill_reps"`
	// FillParallel is the runtime's Options.FillParallel. Default: the runtime's.
	FillParallel int `json:"fill_parallel,omitempty"`
	// Reps is the number of repetitions of each compute snippet per engine. Default 9.
	Reps int `json:"reps"`
	// DataDir holds runsc and the image (from `agentbox setup`); the bench's own state and log go
	// to DataDir/bench. Default: the daemon's default data directory.
	DataDir string `json:"data_dir"`
	// Image is the heavy image. Default python-datascience.
	Image string `json:"image"`
	// JSON writes the results as one JSON document instead of tables.
	JSON bool `json:"-"`
	// NoBoot skips the boot-path scenarios (pool miss by boot, refill by boot).
	NoBoot bool `json:"no_boot"`
	// NoTemplateSharing restores warm sandboxes each with a private copy of the template's pages
	// (heavy.share_template_pages: true).
	NoTemplateSharing bool `json:"no_template_sharing,omitempty"`
	// Creators is how many clients create sessions at once in the HTTP burst scenario. Default 10.
	Creators int `json:"creators"`
	// IdleSessions is how many idle heavy sessions the density scenario opens. Default 10.
	IdleSessions int `json:"idle_sessions"`
	// NoDensity skips the density scenario.
	NoDensity bool `json:"no_density"`
	// NoHTTP skips the scenarios run through the HTTP API of a daemon in this process (one-shot,
	// burst of session creates, density).
	NoHTTP bool `json:"no_http"`
	// Log receives progress lines. Default os.Stderr.
	Log io.Writer `json:"-"`
}

// heavyDefaults are the defaults of HeavyOptions, as its flags show them.
func heavyDefaults() HeavyOptions {
	return HeavyOptions{N: 50, NBoot: 10, Cells: 200, Refill: 8, RefillReps: 5, Reps: 9, Creators: 10, IdleSessions: 10,
		DataDir: config.DefaultDataDir(), Image: "python-datascience", Log: os.Stderr}
}

func (o *HeavyOptions) defaults() { fillDefaults(o, heavyDefaults()) }

const heavyUsage = `usage: agentbox bench heavy [flags]

Measures the heavy tier (gVisor) in this process, with a state directory of its own
(DATA_DIR/bench/heavy): session start served by the warm pool, by a restore and by a boot, the
first pandas cell, cells in a warm session, the pool's refill rate, and a CPU-bound and a
pandas-bound cell; and, in the same run, the baselines they are ratios of: the image's own
python3 run natively in a chroot of the image. Then, through the HTTP API of a daemon it starts
in this process: a one-shot print, session create → first result from concurrent creators, and
the memory (PSS) of idle heavy sessions. Needs root and ` + "`agentbox setup`" + ` (runsc and
the python-datascience image).

flags:
`

func mainHeavy(ctx context.Context, args []string, out io.Writer) error {
	var o HeavyOptions
	d := heavyDefaults()
	fs := newFlagSet("heavy", heavyUsage, out)
	fs.IntVar(&o.N, "n", d.N, "timed runs of each session-start scenario served warm or by a restore")
	fs.IntVar(&o.NBoot, "n-boot", d.NBoot, "timed runs of the session-start scenarios served by a boot")
	fs.IntVar(&o.Cells, "cells", d.Cells, "timed cells in a warm session")
	fs.IntVar(&o.Refill, "refill", d.Refill, "sandboxes each refill scenario makes from an empty pool")
	fs.IntVar(&o.RefillReps, "refill-reps", d.RefillReps, "repetitions of each refill scenario (at most 3 for the boot path)")
	fs.IntVar(&o.FillParallel, "fill-parallel", d.FillParallel, "warm sandboxes made at once (default: the runtime's)")
	fs.IntVar(&o.Reps, "reps", d.Reps, "repetitions of each compute snippet per engine (the median is reported)")
	fs.StringVar(&o.DataDir, "data-dir", d.DataDir, "data directory: runsc and images, and bench/ for the bench's own state")
	fs.StringVar(&o.Image, "image", d.Image, "heavy image")
	fs.BoolVar(&o.JSON, "json", false, "write the results as JSON")
	fs.BoolVar(&o.NoBoot, "no-boot", false, "skip the boot-path scenarios (they take the longest)")
	fs.BoolVar(&o.NoTemplateSharing, "no-template-sharing", false, "restore warm sandboxes each with a private copy of the template's pages (heavy.share_template_pages: false)")
	fs.IntVar(&o.Creators, "creators", d.Creators, "clients creating sessions at once in the HTTP burst scenario")
	fs.IntVar(&o.IdleSessions, "idle-sessions", d.IdleSessions, "idle heavy sessions the density scenario opens (0 skips it)")
	fs.BoolVar(&o.NoHTTP, "no-http", false, "skip the scenarios through the HTTP API of a daemon in this process")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench heavy: unexpected arguments %q", fs.Args())
	}
	if o.N < 1 || o.NBoot < 1 || o.Cells < 1 || o.Refill < 1 || o.RefillReps < 1 || o.Reps < 1 || o.FillParallel < 0 || o.Creators < 1 {
		return errors.New("bench heavy: -n, -n-boot, -cells, -refill, -refill-reps, -reps and -creators must be at least 1")
	}
	switch {
	case o.IdleSessions == 0:
		o.NoDensity = true
	case o.IdleSessions < 0:
		return errors.New("bench heavy: -idle-sessions must not be negative")
	}
	return RunHeavy(ctx, o, out)
}
