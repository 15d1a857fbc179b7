package interp_test

import (
	"testing"

	"github.com/agentbox-dev/agentbox/internal/daemon/daemontest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

func TestMain(m *testing.M) { daemontest.Main(m) }

func heavyManager(t testing.TB) *sandbox.Audited { return daemontest.HeavyManager(t) }
