package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/agentbox-dev/agentbox/api"
)

// RouteOptions are the flags of `agentbox route` and what tests replace.
type RouteOptions struct {
	DaemonOptions
	// Request is what would be run: its code, runtime, packages, image and network.
	Request api.RunRequest
	JSON    bool
	Stdout  io.Writer
	Stderr  io.Writer
}

// Route asks the daemon where the code would run and why, without running it, and prints the
// tier and the reasons (or the answer as JSON).
func Route(ctx context.Context, opts RouteOptions) int {
	c, err := opts.client()
	if err != nil {
		fmt.Fprintf(opts.Stderr, "agentbox route: %v\n", err)
		return exitUsage
	}
	r, err := c.Route(ctx, opts.Request)
	if err != nil {
		return apiFailure(ctx, opts.Stderr, "route", err)
	}
	if opts.JSON {
		printJSON(opts.Stdout, r)
		return exitOK
	}
	fmt.Fprintf(opts.Stdout, "%s\n", r.Tier)
	for _, why := range r.Reasons {
		fmt.Fprintf(opts.Stdout, "  %s\n", why)
	}
	return exitOK
}

func routeCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	opts := RouteOptions{Stdout: stdout, Stderr: stderr}
	var packages listFlag
	fs := newFlagSet("route", `Usage: agentbox route [flags] FILE
       agentbox route [flags] -          (read the code from stdin)

Says which tier the daemon would run a Python file on, and why (the router reads its imports),
without running it: the tier on the first line, then the reasons.

Examples:
  agentbox route analysis.py
  echo 'import pandas' | agentbox route -
  agentbox route --runtime nano --json script.py`, stderr)
	fs.StringVar(&opts.Request.Runtime, "runtime", "", "runtime asked for: auto, nano or heavy (default auto)")
	fs.Var(&packages, "package", "a Python package the code needs (picks a heavy image that has it); repeatable or comma-separated")
	fs.StringVar(&opts.Request.Image, "image", "", "a heavy image by name")
	fs.BoolVar(&opts.Request.Network, "network", false, "ask for a way out through the egress gateway (heavy only)")
	fs.BoolVar(&opts.JSON, "json", false, "print the answer as JSON ({tier, reasons})")
	fs.StringVar(&opts.URL, "url", "", "daemon `URL` (default $AGENTBOX_URL or http://127.0.0.1:8420)")
	fs.StringVar(&opts.DataDir, "data-dir", "", "data `DIR` whose api_key file holds the key (default $AGENTBOX_DATA_DIR or ~/.cache/agentbox)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "agentbox route: give one file, or - to read the code from stdin (agentbox route -h for help)")
		return exitUsage
	}
	req, err := buildRequest(RunOptions{File: pos[0], Stdin: stdin})
	if err != nil {
		fmt.Fprintf(stderr, "agentbox route: %v\n", err)
		return exitUsage
	}
	opts.Request.Code = req.Code
	opts.Request.Packages = packages
	return Route(ctx, opts)
}
