//go:build !linux

package guest

import "fmt"

// Main is the guest agent's entry point; the agent only runs on Linux (inside a sandbox).
func Main(args []string) int {
	fmt.Println("agentbox-guest: runs only on Linux, as the init of an agentbox sandbox")
	return 2
}
