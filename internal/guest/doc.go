// Package guest is the agent inside any VM-like sandbox (today the heavy tier's gVisor
// containers; a microVM tier would run the same agent): the sandbox's init process
// (cmd/agentbox-guest, a static binary, put into the root file system by package rootfs). It
// lives outside any one tier so that a second VM-like tier never imports another. It speaks
// package proto with the daemon over its stdin and stdout, and keeps one Python process
// (repl.py) running as an unprivileged user, so a session keeps variables, imports and files
// between runs.
//
// What it does for a run: writes the input files, notes the work directory, hands the code to
// Python, streams stdout and stderr back as the code prints them (up to the run's caps, the rest
// is dropped and flagged), interrupts the cell at its timeout (KeyboardInterrupt; if the cell does
// not end within the grace period the Python process is killed and restarted, and the result says
// the state is lost), and returns the files the code created or changed, the figures it drew
// (matplotlib figures shown or left open, as PNG artifacts, sent by the REPL as each is drawn) and
// the value of its last expression (text, HTML and JSON, as Jupyter would display it; it is not
// printed). These are bounded by the caps in package proto.
//
// Between runs and beside them it serves the daemon's file operations (files.go) as the
// sandbox's user, not as root, under the session's directories (the work directory and /tmp),
// never following a symbolic link the code planted out of them.
//
// As init it also reaps every orphaned process. When its stdin ends or a frame is broken it kills
// everything and exits, which ends the sandbox: a dead daemon never leaves a sandbox running.
package guest
