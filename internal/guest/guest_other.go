//go:build !linux

package guest

import "fmt"

// Main is the guest agent's entry point; the agent only runs on Linux (inside gVisor).
func Main(args []string) int {
	fmt.Println("agentbox-guest: runs only on Linux, inside a heavy sandbox")
	return 2
}
