package engine

import (
	crand "crypto/rand"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"time"
)

// clock is an instance's view of time and randomness. Wazero calls its methods from the guest's
// clock_time_get and random_get; they consult state the host switches per run, so a warm instance
// can serve both a real run and a deterministic one.
//
// In real mode the wall clock is the host's, the monotonic clock advances with real time, and
// random bytes come from crypto/rand. In fixed mode the wall clock starts at a given time and,
// like the monotonic clock, advances by step per read (plus the length of every sleep), and random
// bytes come from a ChaCha8 stream seeded per run: the same code with the same inputs reads the
// same sequence.
//
// The monotonic clock never goes back when the mode changes: it continues from its last value.
type clock struct {
	mu       sync.Mutex
	fixed    bool
	step     int64
	wall     int64 // fixed mode: next wall reading, ns since the epoch
	mono     int64 // last monotonic reading handed out (or reached by a sleep)
	monoBase int64 // real mode: mono = monoBase + time.Since(realBase)
	realBase time.Time
	rng      *rand.ChaCha8
}

// fixedStep is how far a fixed clock advances per read.
const fixedStep = int64(time.Millisecond)

// warmEpoch and warmSeed make every instance's start-up identical: an instance parked for the
// first time has the same memory as any other (what per-step snapshots build on).
var warmEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

const warmSeed = 0

func newClock() *clock {
	c := &clock{}
	c.setFixed(warmEpoch, warmSeed)
	return c
}

func seedBytes(seed int64) [32]byte {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], uint64(seed))
	copy(s[8:], "agentbox nano determinism")
	return s
}

// setFixed switches to fixed mode: the wall clock reads start next.
func (c *clock) setFixed(start time.Time, seed int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fixed = true
	c.step = fixedStep
	c.wall = start.UnixNano()
	c.rng = rand.NewChaCha8(seedBytes(seed))
}

// setReal switches to the host's clocks and crypto/rand.
func (c *clock) setReal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fixed {
		c.fixed = false
		c.monoBase = c.mono
		c.realBase = time.Now()
		c.rng = nil
	}
}

func (c *clock) monoLocked() int64 {
	if !c.fixed {
		if m := c.monoBase + int64(time.Since(c.realBase)); m > c.mono {
			c.mono = m
		}
	}
	return c.mono
}

// walltime implements wazero's sys.Walltime.
func (c *clock) walltime() (int64, int32) {
	ns := c.wallNow(true)
	return ns / 1e9, int32(ns % 1e9)
}

// wallNow reads the wall clock in ns; advance says whether this is a guest read (fixed mode
// steps) or a peek (file times).
func (c *clock) wallNow(advance bool) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fixed {
		return time.Now().UnixNano()
	}
	ns := c.wall
	if advance {
		c.wall += c.step
	}
	return ns
}

// peekWall is the wall clock for file times: it does not count as a read.
func (c *clock) peekWall() int64 { return c.wallNow(false) }

// nanotime implements wazero's sys.Nanotime.
func (c *clock) nanotime() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fixed {
		c.mono += c.step
		return c.mono
	}
	return c.monoLocked()
}

// now returns the current reading of a clock id without advancing it (for absolute waits).
func (c *clock) now(id uint32) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == clockRealtime {
		if c.fixed {
			return c.wall
		}
		return time.Now().UnixNano()
	}
	return c.monoLocked()
}

// slept moves fixed clocks past a wait of d, as if the time had passed for them too.
func (c *clock) slept(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fixed && d > 0 {
		c.wall += int64(d)
		c.mono += int64(d)
	}
}

// Read implements the guest's random source (wazero's WithRandSource).
func (c *clock) Read(p []byte) (int, error) {
	c.mu.Lock()
	if c.fixed {
		defer c.mu.Unlock()
		return c.rng.Read(p)
	}
	c.mu.Unlock()
	return crand.Read(p)
}

// clockState is a saved clock, for resetting an instance to how it was when it first parked.
type clockState struct {
	fixed      bool
	step       int64
	wall, mono int64
	monoBase   int64
	realBase   time.Time
	rng        []byte // the ChaCha8 stream's state (fixed mode)
}

func (c *clock) save() clockState {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := clockState{fixed: c.fixed, step: c.step, wall: c.wall, mono: c.mono, monoBase: c.monoBase, realBase: c.realBase}
	if c.rng != nil {
		s.rng, _ = c.rng.MarshalBinary()
	}
	return s
}

func (c *clock) restore(s clockState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fixed, c.step, c.wall, c.mono, c.monoBase, c.realBase = s.fixed, s.step, s.wall, s.mono, s.monoBase, s.realBase
	c.rng = nil
	if s.rng != nil {
		c.rng = rand.NewChaCha8(seedBytes(warmSeed))
		if c.rng.UnmarshalBinary(s.rng) != nil {
			c.rng = rand.NewChaCha8(seedBytes(warmSeed))
		}
	}
}

// WASI clock ids.
const (
	clockRealtime  = 0
	clockMonotonic = 1
)
