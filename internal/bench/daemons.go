package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
)

// daemonConfig is the configuration of a daemon the bench starts: the daemon's own and the
// sections of the two tiers, which the scenarios set and the notes report.
type daemonConfig struct {
	config.Config
	Nano  nano.Config
	Heavy heavy.Config
}

// startDaemon starts a daemon in this process: the manager built by internal/daemon from the
// data directory's artifacts with the default configuration as edit changes it, served by
// the daemon on a random loopback port with a random API key, and reached through the
// public client like any other. Its log goes to DataDir/bench/logName. Closing the target stops
// it. The daemon's processes (nano workers, runsc) are this process's descendants, so the
// target reads their memory with selfMemory. The configuration returned has the address it
// listens on.
func startDaemon(ctx context.Context, dataDir, logName string, edit func(*daemonConfig), progress func(string, ...any)) (*httpTarget, daemonConfig, string, error) {
	dc := daemonConfig{Config: config.Default(), Nano: nano.DefaultConfig(), Heavy: heavy.DefaultConfig()}
	dc.DataDir = dataDir
	dc.Listen = "127.0.0.1:0"
	// Its own audit log: a daemon of the user's may hold the data directory's. Its own sessions
	// directory too, emptied: a bench's sessions are not the user's to resume.
	dc.Audit.Dir = filepath.Join(dataDir, "bench", "audit")
	dc.Sessions.Dir = filepath.Join(dataDir, "bench", "sessions", logName)
	_ = os.RemoveAll(dc.Sessions.Dir)
	edit(&dc)
	cfg, err := dc.resolve()
	if err != nil {
		return nil, dc, "", err
	}
	logPath := filepath.Join(dataDir, "bench", logName)
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, dc, "", err
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, dc, "", err
	}
	log := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo}))
	log.Info("bench: starting an in-process daemon", "warm", dc.Nano.WarmPerWorker(), "workers", dc.Nano.Workers, "heavy", dc.Heavy.Enabled)

	progress("starting an in-process daemon: %d nano workers, %d warm interpreters each, heavy tier %s (log: %s)",
		dc.Nano.Workers, dc.Nano.WarmPerWorker(), dc.Heavy.Enabled, logPath)
	start := time.Now()
	m, err := daemon.NewManager(ctx, cfg, log)
	if err != nil {
		logFile.Close()
		return nil, dc, "", fmt.Errorf("start an in-process daemon: %w", err)
	}
	// A random key, unless the caller gives one (the nodes and gateway of bench cluster share it).
	key := cfg.APIKey
	if key == "" {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			m.Close()
			logFile.Close()
			return nil, dc, "", err
		}
		key = hex.EncodeToString(b)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		m.Close()
		logFile.Close()
		return nil, dc, "", err
	}
	srv, err := daemon.NewFrontDoors(m, daemon.FrontDoorOptions{APIKey: key, Logger: log, Version: "bench",
		E2B: daemon.E2BOptionsFrom(cfg.E2B), Node: daemon.NodeOptionsOf(cfg, ln.Addr())})
	if err != nil {
		ln.Close()
		m.Close()
		logFile.Close()
		return nil, dc, "", err
	}
	dc.Listen = ln.Addr().String()
	sctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	stop := func() error {
		cancel()
		err := <-served
		_ = srv.Close()
		if cerr := m.Close(); err == nil {
			err = cerr
		}
		logFile.Close()
		return err
	}
	t, err := newHTTPTarget("http://"+ln.Addr().String(), key)
	if err != nil {
		stop()
		return nil, dc, "", err
	}
	t.stop = stop
	t.memory = selfMemory
	t.doors, t.key = srv, key
	progress("in-process daemon ready in %v at %s", time.Since(start).Round(time.Millisecond), ln.Addr())
	return t, dc, logPath, nil
}

// resolve checks the tiers' sections and writes them into the daemon's configuration.
func (dc daemonConfig) resolve() (config.Config, error) {
	cfg := dc.Config
	if err := dc.Nano.Validate(); err != nil {
		return cfg, err
	}
	if err := dc.Heavy.Validate(); err != nil {
		return cfg, err
	}
	if err := cfg.Tiers.Set(string(nano.Tier), dc.Nano); err != nil {
		return cfg, err
	}
	if err := cfg.Tiers.Set(string(heavy.Tier), dc.Heavy); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}
