//go:build !linux || !agentbox_wazeroguard

package engine

import "context"

// GuardPages reports whether this build compiles guests without bounds checks (guard_on.go);
// this one keeps wazero's checks.
const GuardPages = false

// guardReservation is the address space each guest memory reserves beyond its cap: none.
const guardReservation = 0

func withGuardPages(ctx context.Context) context.Context { return ctx }
