package volumes

import (
	"testing"
	"time"
)

// SetUnmountBusyFor sets how long an unmount tries again on EBUSY, for the test's life.
func SetUnmountBusyFor(t testing.TB, d time.Duration) {
	old := unmountBusyFor
	unmountBusyFor = d
	t.Cleanup(func() { unmountBusyFor = old })
}
