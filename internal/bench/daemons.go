package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/server"
)

// warmTarget is the daemon of the warm scenarios: -url, or one the bench starts with the default
// configuration (warm pool on).
func (b *bencher) warmTarget(ctx context.Context) (target, error) {
	if b.opts.URL != "" {
		return b.remote(ctx, b.opts.URL, "warm")
	}
	return b.inProcess(ctx, config.Default().WarmPerWorker())
}

// coldTarget is the daemon of the cold scenarios: -cold-url, or one the bench starts with the warm
// pool off. With -url but no -cold-url there is none: the bench cannot reconfigure a running
// daemon.
func (b *bencher) coldTarget(ctx context.Context) (target, error) {
	switch {
	case b.opts.ColdURL != "":
		return b.remote(ctx, b.opts.ColdURL, "cold")
	case b.opts.URL != "":
		return nil, errors.New("skipped: with -url, give -cold-url: a second daemon configured with nano.warm = 0")
	}
	return b.inProcess(ctx, 0)
}

func (b *bencher) remote(ctx context.Context, url, what string) (target, error) {
	t, err := newHTTPTarget(url, b.opts.APIKey)
	if err != nil {
		return nil, err
	}
	if _, _, err := t.Pool(ctx); err != nil {
		return nil, fmt.Errorf("daemon at %s: %w", url, err)
	}
	b.note("%s scenarios ran against the daemon at %s (%s)", what, url, t.version(ctx))
	return t, nil
}

// inProcess starts a daemon in this process: the manager built by internal/daemon from the data
// directory's artifacts with nano.warm = warm, served by internal/server on a random loopback port
// with a random API key, and reached through the public client like any other. Its log goes to
// DataDir/bench/daemon.log. Closing the target stops it.
func (b *bencher) inProcess(ctx context.Context, warm int) (target, error) {
	cfg := config.Default()
	cfg.DataDir = b.opts.DataDir
	cfg.Nano.Warm = &warm
	cfg.Listen = "127.0.0.1:0"
	// Its own audit log: a daemon of the user's may hold the data directory's.
	cfg.Audit.Dir = filepath.Join(b.opts.DataDir, "bench", "audit")
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logPath := filepath.Join(b.opts.DataDir, "bench", "daemon.log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo}))
	log.Info("bench: starting an in-process daemon", "warm", warm, "workers", cfg.Nano.Workers)

	b.progress("starting an in-process daemon: %d nano workers, %d warm interpreters each (log: %s)", cfg.Nano.Workers, warm, logPath)
	start := time.Now()
	m, err := daemon.NewManager(ctx, cfg, log)
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start an in-process daemon: %w", err)
	}
	key := make([]byte, 16)
	if _, err := rand.Read(key); err != nil {
		m.Close()
		logFile.Close()
		return nil, err
	}
	srv, err := server.New(server.Options{Manager: m, APIKey: hex.EncodeToString(key), Logger: log, Version: "bench"})
	if err != nil {
		m.Close()
		logFile.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		m.Close()
		logFile.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	stop := func() error {
		cancel()
		err := <-served
		if cerr := m.Close(); err == nil {
			err = cerr
		}
		logFile.Close()
		return err
	}
	t, err := newHTTPTarget("http://"+ln.Addr().String(), hex.EncodeToString(key))
	if err != nil {
		stop()
		return nil, err
	}
	t.stop = stop
	b.progress("in-process daemon ready in %v at %s", time.Since(start).Round(time.Millisecond), ln.Addr())
	pool := "on"
	if warm == 0 {
		pool = "off"
	}
	b.note("the bench started its own daemon for the pool-%s scenarios: %d nano workers, nano.warm = %d, served on %s; its log is %s",
		pool, cfg.Nano.Workers, warm, ln.Addr(), logPath)
	return t, nil
}
