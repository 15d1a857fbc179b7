//go:build !linux

package heavy

import "os/exec"

// startBatch starts cmd (SCHED_BATCH is Linux's; see schedbatch_linux.go).
func startBatch(cmd *exec.Cmd) error { return cmd.Start() }
