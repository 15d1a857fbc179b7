package bench

import (
	"os"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/jail"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/worker"
)

// The test binary is a nano worker too, for the benches that start nano in this process (bench
// steps): the runtime re-executes it, as the daemon re-executes agentbox.
func TestMain(m *testing.M) {
	jail.MaybeInit()
	if len(os.Args) > 1 && os.Args[1] == nano.WorkerArg {
		os.Exit(worker.Main(os.Args[2:]))
	}
	os.Exit(m.Run())
}
