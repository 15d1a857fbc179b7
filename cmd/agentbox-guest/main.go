// Command agentbox-guest is the init process of a VM-like sandbox (today the heavy tier's gVisor
// sandboxes). It is built static (CGO_ENABLED=0) and copied into images by `agentbox image
// build`; it is not meant to be run by hand. See package internal/guest.
package main

import (
	"os"

	"github.com/agentbox-dev/agentbox/internal/guest"
)

func main() {
	os.Exit(guest.Main(os.Args[1:]))
}
