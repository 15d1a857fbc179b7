// Command agentbox is the daemon, the CLI and the embedded engine of agentbox. The commands live
// in internal/cli; this file only does what must happen before them.
package main

import (
	"context"
	"os"

	"github.com/agentbox-dev/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/internal/jail"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/worker"
)

func main() {
	// A jailed worker starts as this binary; its init stage must run before anything else and
	// never returns. In every other process this returns at once.
	jail.MaybeInit()

	if len(os.Args) > 1 && os.Args[1] == nano.WorkerArg {
		os.Exit(worker.Main(os.Args[2:]))
	}

	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
