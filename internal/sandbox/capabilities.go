package sandbox

import (
	"fmt"
	"strings"
	"time"
)

// Capabilities is what a tier offers. The Manager places work by it and never by a tier's name:
// a request goes to the first tier, in the router's ranking, whose capabilities fit it, and falls
// back along the ranking when a tier meets code it cannot run. Adding a tier is a runtime that
// states its capabilities, and one line in the wiring (internal/daemon).
type Capabilities struct {
	// Tier is the tier's name, as requests ask for it and results report it ("nano").
	Tier Tier
	// Images: the tier runs images built from package lists, so a request may ask for packages
	// or an image. Such a runtime is a Catalog.
	Images bool
	// Network: a sandbox of this tier can reach out through the egress gateway. Without it, a
	// request that asks for network goes elsewhere.
	Network bool
	// Threads, Processes and Sockets: what code may do there beyond computing (start threads,
	// start processes, open sockets, even to nowhere). See Gives.
	Threads, Processes, Sockets bool
	// Sessions: NewSession works. SessionFiles: its sessions read and change files between runs
	// (they are SessionFiles).
	Sessions, SessionFiles bool
	// Max are the largest limits the tier can honour, below what the policy allows (nano: the Wasm
	// memory reserve, the worker protocol's frame size). A zero field means no cap of its own.
	Max Limits
	// Contained: a run has no way out (no network, no host files), so repeating it repeats no
	// outside effect. An auto session on a contained tier may move to another tier by replaying
	// its runs there (move.go).
	Contained bool
	// Snapshot, Rewind, Fork and Pause are the time-travel abilities: keep a session's state at
	// every step, go back to one, start a second session from one, stop a session and resume it
	// later.
	Snapshot, Rewind, Fork, Pause bool
	// HibernateAfter, with Pause: a session of this tier unused this long is paused by the
	// Manager (its state into the snapshot store, its sandbox freed) unless it must stay live
	// (LiveHolder, or a command of its running); its next use resumes it. 0: only
	// ManagerOptions.PauseIdle pauses idle sessions.
	HibernateAfter time.Duration
	// Volumes: its sessions mount volumes (SessionOptions.Mounts).
	Volumes bool
	// Contexts: its sessions run code in code contexts (RunRequest.Context): variables of their
	// own in the session's interpreter, the session's files (contexts.go).
	Contexts bool
}

// Use is something code does beyond computing that a tier may not give it.
type Use string

// The uses a tier states in its Capabilities.
const (
	UseThreads   Use = "threads"
	UseProcesses Use = "subprocesses"
	UseSockets   Use = "sockets"
)

// Gives reports whether the tier gives code the use.
func (c Capabilities) Gives(u Use) bool {
	switch u {
	case UseThreads:
		return c.Threads
	case UseProcesses:
		return c.Processes
	case UseSockets:
		return c.Sockets
	}
	return false
}

// Need is what a run showed its code needed and its tier could not give: a use (a thread, a
// process, a socket) or a module. The Manager looks for a tier that gives it.
type Need struct {
	// After names the error as the result shows it: "RuntimeError: can't start new thread".
	After string
	// Use is the use the tier could not give; empty for a module.
	Use Use
	// Module is the top-level module the tier could not import; empty for a use.
	Module string
}

// what is what the code wanted, for hints: "threads", "pandas".
func (n Need) what() string {
	if n.Use != "" {
		return string(n.Use)
	}
	return n.Module
}

// reason says why a result goes to another tier: "ModuleNotFoundError: No module named 'pandas'
// in nano", "RuntimeError: can't start new thread in nano (nano cannot start threads)".
func (n Need) reason(from Tier) string {
	switch n.Use {
	case UseThreads, UseProcesses:
		return fmt.Sprintf("%s in %s (%s cannot start %s)", n.After, from, from, n.Use)
	case UseSockets:
		return fmt.Sprintf("%s in %s (%s cannot open sockets)", n.After, from, from)
	}
	return n.After + " in " + string(from)
}

// Explainer is an optional ability of a Runtime: reading its own results for what the code needed
// that the tier cannot give (nano: its interpreter's refusal to start a thread, a
// ModuleNotFoundError). The Manager then runs the code again in a tier that gives it, when the
// request let it choose.
type Explainer interface {
	// Cannot returns what res shows the code needed and the tier lacks. A result with an API error
	// (a limit) never shows one: the code did not get as far as asking.
	Cannot(res *Result, err error) (Need, bool)
}

// The misfits Manager.refuse answers with a hint that names the tiers that fit.
const (
	misfitImages  = "has no images or packages"
	misfitNetwork = "never has network"
)

// misfit says why a tier cannot take what a request asks of its sandbox (images, network, limits),
// or "" when it can. Limits are already defaulted.
func (c Capabilities) misfit(packages []string, image string, network bool, l Limits) string {
	switch {
	case (len(packages) > 0 || image != "") && !c.Images:
		return misfitImages
	case network && !c.Network:
		return misfitNetwork
	}
	m := c.Max
	switch {
	case m.MemoryBytes > 0 && l.MemoryBytes > m.MemoryBytes:
		return fmt.Sprintf("takes at most %s of memory", fmtUnit(m.MemoryBytes, 1<<20, "MiB"))
	case m.Timeout > 0 && l.Timeout > m.Timeout:
		return fmt.Sprintf("takes a timeout of at most %v", m.Timeout)
	case m.FilesBytes > 0 && l.FilesBytes > m.FilesBytes:
		return fmt.Sprintf("takes a files limit of at most %s", fmtUnit(m.FilesBytes, 1<<20, "MiB"))
	case m.StdoutBytes > 0 && l.StdoutBytes > m.StdoutBytes:
		return fmt.Sprintf("takes a stdout limit of at most %d bytes", m.StdoutBytes)
	case m.StderrBytes > 0 && l.StderrBytes > m.StderrBytes:
		return fmt.Sprintf("takes a stderr limit of at most %d bytes", m.StderrBytes)
	}
	return ""
}

// tierList names tiers for messages: "heavy", "heavy or gpu".
func tierList(ts []Tier) string { return strings.Join(tierStrings(ts), " or ") }
