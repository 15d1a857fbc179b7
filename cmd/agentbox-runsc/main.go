// Command agentbox-runsc is gVisor's runsc, built from the gVisor module version go.mod pins,
// with one change: in the sandbox process (the sentry, `runsc ... boot ...`) the Go heap's free
// pages go back to the kernel whenever the sentry turns idle (idle.go). runsc starts that process
// with an empty environment, so GOGC or GODEBUG cannot reach it from outside; a main of our own
// is the way in. Every subcommand is otherwise runsc's own. `agentbox setup` builds it into the
// data directory (internal/setup); docs/RATIONALE.md, "Memory per idle heavy session", has the
// figures.
package main

import (
	"fmt"
	"os"

	"gvisor.dev/gvisor/runsc/cli/maincli"
	"gvisor.dev/gvisor/runsc/version"
)

// build names this main's changes to runsc; `runsc --version` prints it first, and setup
// rebuilds a cached binary that does not say it (heavy.RunscBuild must equal it).
const build = "agentbox-runsc 14"

// version.Version is set with -ldflags -X, and must be referenced to be linked.
var _ = version.Version()

func main() {
	switch subcommand(os.Args[1:]) {
	case "boot":
		go releaseWhenIdle(newHeapWatch(), tick)
	case "":
		if wantsVersion(os.Args[1:]) {
			fmt.Println(build)
		}
	}
	maincli.Main()
}
