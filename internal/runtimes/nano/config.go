package nano

import (
	"fmt"
	"path/filepath"
	"runtime"
	"time"

	"github.com/agentbox-dev/agentbox/internal/config"
)

// Config is the nano tier's section of the daemon's configuration ("nano": {...}).
type Config struct {
	// Workers is the number of jailed worker processes serving one-shot runs. Each runs one guest
	// at a time. Default: the number of CPUs, at least 2.
	Workers int `json:"workers"`
	// Warm is how many parked interpreters each one-shot worker keeps ready. 0 disables the warm
	// pool (every run starts an interpreter: the cold path). Default 2.
	Warm *int `json:"warm"`
	// SessionWarm is how many session workers, each with its interpreter parked, are started
	// ahead so that a new nano session answers its first run in milliseconds. Each costs what an
	// idle session does (~60 MiB). 0 starts every session's worker when it is created. Default 2.
	SessionWarm *int `json:"session_warm"`
	// MaxSessionWorkers bounds the nano session worker processes (each ~60 MiB); past it, a
	// session's run takes the worker of the idle session used longest ago, hibernating it first.
	// Default 64.
	MaxSessionWorkers int `json:"max_session_workers"`
	// SessionHibernateAfter is how long a nano session may stay unused before its state moves
	// out of its worker process into the daemon as a snapshot (a few MiB instead of a worker's
	// ~60 MiB); its next run restores it in a few milliseconds. "0s" keeps sessions in their
	// workers. Default 10s: agents' turns come seconds apart, and a restore costs less than a
	// turn's network round trip.
	SessionHibernateAfter config.Duration `json:"session_hibernate_after"`
	// Grace is how long past a run's deadline the daemon waits for the worker's own answer before
	// it kills the worker. Default 300ms: the worker interrupts a computing guest at the deadline
	// and waits up to 200ms for it to stop (the interrupt lands in microseconds; the rest is room
	// for a loaded machine) before it answers.
	Grace config.Duration `json:"grace"`
}

// DefaultConfig is the nano section with every default filled in.
func DefaultConfig() Config {
	warm, sessionWarm := 2, 2
	return Config{Workers: max(runtime.NumCPU(), 2), Warm: &warm, SessionWarm: &sessionWarm,
		MaxSessionWorkers: 64, Grace: config.Duration(300 * time.Millisecond),
		SessionHibernateAfter: config.Duration(10 * time.Second)}
}

// ConfigFrom reads the nano section of c over the defaults and checks it.
func ConfigFrom(c config.Config) (Config, error) {
	n := DefaultConfig()
	if err := c.Tiers.Decode(string(Tier), &n); err != nil {
		return n, err
	}
	return n, n.Validate()
}

// Configure changes the nano section of c, for code and tests that build a configuration in Go.
func Configure(c *config.Config, f func(*Config)) error {
	n, err := ConfigFrom(*c)
	if err != nil {
		return err
	}
	f(&n)
	return c.Tiers.Set(string(Tier), n)
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Workers < 1:
		return fmt.Errorf("config: nano.workers must be at least 1")
	case c.Warm != nil && (*c.Warm < 0 || *c.Warm > 16):
		return fmt.Errorf("config: nano.warm must be between 0 and 16")
	case c.MaxSessionWorkers < 0 || c.MaxSessionWorkers > 4096:
		return fmt.Errorf("config: nano.max_session_workers must be between 1 and 4096 (0 for the default, 64)")
	case c.SessionHibernateAfter < 0:
		return fmt.Errorf("config: nano.session_hibernate_after must not be negative")
	case c.SessionWarm != nil && (*c.SessionWarm < 0 || *c.SessionWarm > 64):
		return fmt.Errorf("config: nano.session_warm must be between 0 and 64")
	}
	return nil
}

// WarmPerWorker is the configured warm count.
func (c Config) WarmPerWorker() int {
	if c.Warm == nil {
		return 2
	}
	return *c.Warm
}

// SessionWarmWorkers is the configured number of spare session workers.
func (c Config) SessionWarmWorkers() int {
	if c.SessionWarm == nil {
		return 2
	}
	return *c.SessionWarm
}

// Dir is where the nano tier's artifacts live under a daemon's data directory: the CPython WASI
// build and its compilation cache.
func Dir(c config.Config) string { return filepath.Join(c.DataDir, string(Tier)) }
