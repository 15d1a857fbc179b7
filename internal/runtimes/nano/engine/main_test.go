package engine

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestMain runs the tests as a worker runs the engine: with the collector off (a collection that
// starts while a guest computes waits for the guest; see worker/gc.go); newInstance collects,
// when no guest computes.
func TestMain(m *testing.M) {
	debug.SetGCPercent(-1)
	os.Exit(m.Run())
}
