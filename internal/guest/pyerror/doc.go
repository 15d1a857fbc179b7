// Package pyerror is the one formatter of Python exceptions that every tier's Python driver
// shares: the nano tier's driver (internal/runtimes/nano/engine/driver.py, run by CPython in Wasm)
// and the guest agent's REPL (internal/guest/repl.py, run inside VM-like sandboxes). Both turn an
// exception that ended a run into the same record, {name, value, traceback}, and echo the
// traceback to the run's stderr as Python would; keeping that in one file keeps the tiers' errors
// alike.
//
// The formatter is Python (pyerror.py), embedded here. A driver does not import it: a driver runs
// from one -c argument, and neither interpreter has this file on its path. Each driver's Go side
// puts the formatter's source into the driver's in place of a marker line (Inline), below the
// driver's own code so the driver's line numbers do not move. What is specific to a tier, such as
// which frames of its own an interrupt leaves in a traceback, stays in its driver and is handed
// to the formatter as an edit of the text.
package pyerror
