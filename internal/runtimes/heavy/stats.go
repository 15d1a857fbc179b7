package heavy

import (
	"sync/atomic"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// counters count runs by outcome, for Health and metrics.
type counters struct {
	runs, timeouts, memory, failures atomic.Int64
}

func (c *counters) count(err error) {
	c.runs.Add(1)
	switch sandbox.KindOf(err) {
	case "":
	case sandbox.KindTimeout:
		c.timeouts.Add(1)
	case sandbox.KindMemoryLimit:
		c.memory.Add(1)
	default:
		c.failures.Add(1)
	}
}
