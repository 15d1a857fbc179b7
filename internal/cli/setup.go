package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/setup"
)

// SetupOptions are the flags of `agentbox setup`.
type SetupOptions struct {
	ConfigFile string
	DataDir    string
	// Source is where the nano tier's CPython comes from: "npm" or "source". Empty: setup's
	// default.
	Source string
	Force  bool
	Out    io.Writer
	// Run performs the setup. Default setup.Run.
	Run func(ctx context.Context, cfg config.Config, opts setup.Options, out io.Writer) error
}

// Setup prepares the data directory for the runtimes.
func Setup(ctx context.Context, opts SetupOptions) error {
	cfg, err := loadConfig(opts.ConfigFile, "", opts.DataDir)
	if err != nil {
		return err
	}
	if opts.Run == nil {
		opts.Run = setup.Run
	}
	return opts.Run(ctx, cfg, setup.Options{NanoSource: opts.Source, Force: opts.Force}, opts.Out)
}

func setupCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts := SetupOptions{Out: stdout}
	fs := newFlagSet("setup", `Usage: agentbox setup [flags]

Fetches and prepares what the runtimes run from (the CPython WebAssembly build of the nano tier
and its compilation cache) in the data directory. Safe to run again: steps already done are
skipped.`, stderr)
	fs.StringVar(&opts.ConfigFile, "config", "", "daemon configuration `FILE` (JSON)")
	fs.StringVar(&opts.DataDir, "data-dir", "", "data `DIR` (default $AGENTBOX_DATA_DIR or ~/.cache/agentbox)")
	fs.StringVar(&opts.Source, "source", "", "where nano's CPython comes from: npm (quick) or source (builds an optimised one; minutes) (default "+setup.DefaultNanoSource+")")
	fs.BoolVar(&opts.Force, "force", false, "redo steps that are already done")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "agentbox setup: unexpected argument %q\n", pos[0])
		return exitUsage
	}
	if err := Setup(ctx, opts); err != nil {
		fmt.Fprintf(stderr, "agentbox setup: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// loadConfig reads the configuration file and environment, then applies flag overrides.
func loadConfig(file, listen, dataDir string, more ...func(*config.Config)) (config.Config, error) {
	return config.LoadWith(file, func(cfg *config.Config) {
		if listen != "" {
			cfg.Listen = listen
		}
		if dataDir != "" {
			cfg.DataDir = dataDir
		}
		for _, f := range more {
			f(cfg)
		}
	})
}
