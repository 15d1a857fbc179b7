package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// MCPOptions are the flags of `agentbox mcp` and what tests replace.
type MCPOptions struct {
	// URL is the daemon's URL. Empty means AGENTBOX_URL, else http://127.0.0.1:8420; only then
	// may the server fall back to a local engine when no daemon answers, as `agentbox run` does.
	URL string
	// DefaultURL is tried when neither URL nor AGENTBOX_URL is set. Default client.DefaultURL.
	DefaultURL string
	// APIKey is the daemon's key. Empty means AGENTBOX_API_KEY, else the api_key file in
	// DataDir (or the default data directory).
	APIKey string
	// DataDir and ConfigFile configure the local engine (and where the key file is looked for).
	DataDir    string
	ConfigFile string
	// Local skips the daemon and serves with a local engine.
	Local bool
	// LogLevel is the level of the log on Stderr (one line per tool call at info). Default warn.
	LogLevel string
	// HealthTimeout bounds the check for a daemon. Default 1s.
	HealthTimeout time.Duration
	// Stdin and Stdout carry the protocol; agentbox's own messages and log go to Stderr.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// NewManager builds the local engine. Default daemon.NewManager.
	NewManager ManagerFactory
}

// ServeMCP serves agentbox's MCP tools over Stdin and Stdout until the client hangs up or ctx is
// done, and returns the exit code. The tools are the daemon's /mcp ones: they call the daemon
// that answers at the URL, as its key; with no daemon there (and no URL asked for), an engine
// started in this process for as long as the client stays, configured as `agentbox serve` would
// be.
func ServeMCP(ctx context.Context, opts MCPOptions) int {
	if opts.HealthTimeout <= 0 {
		opts.HealthTimeout = time.Second
	}
	if opts.NewManager == nil {
		opts.NewManager = daemon.NewManager
	}
	if opts.DefaultURL == "" {
		opts.DefaultURL = client.DefaultURL
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "warn"
	}
	log, err := newLogger(opts.Stderr, opts.LogLevel, false)
	if err != nil {
		fmt.Fprintf(opts.Stderr, "agentbox mcp: %v\n", err)
		return exitUsage
	}
	stdio := daemon.MCPStdio{In: opts.Stdin, Out: opts.Stdout, Version: version(), Logger: log}
	if !opts.Local {
		url, explicit := opts.URL, true
		if url == "" {
			url = os.Getenv("AGENTBOX_URL")
		}
		if url == "" {
			url, explicit = opts.DefaultURL, false
		}
		c, err := client.New(url, discoverKey(RunOptions{APIKey: opts.APIKey, DataDir: opts.DataDir}))
		if err != nil {
			fmt.Fprintf(opts.Stderr, "agentbox mcp: %v\n", err)
			return exitUsage
		}
		hctx, cancel := context.WithTimeout(ctx, opts.HealthTimeout)
		_, err = c.Health(hctx)
		cancel()
		switch {
		case err == nil:
			fmt.Fprintf(opts.Stderr, "agentbox: MCP server on stdio, over the daemon at %s\n", url)
			return mcpExit(opts, daemon.ServeMCPClient(ctx, c, stdio))
		case ctx.Err() != nil:
			return exitInterrupted
		case explicit:
			fmt.Fprintf(opts.Stderr, "agentbox: no agentbox daemon answers at %s: %v (hint: start one with `agentbox serve`, or unset AGENTBOX_URL and drop --url to serve with a local engine)\n", url, err)
			return runExitCodes[api.CodeRuntimeUnavailable]
		}
		fmt.Fprintf(opts.Stderr, "agentbox: no daemon at %s; starting a local engine for this MCP session\n", url)
	}
	cfg, err := loadConfig(opts.ConfigFile, "", opts.DataDir)
	if err != nil {
		fmt.Fprintf(opts.Stderr, "agentbox mcp: %v\n", err)
		return exitFailure
	}
	// The local engine lives as long as its MCP client: its sessions end with it, and it leaves
	// the sessions directory (and its lock) to a daemon.
	cfg.Sessions.Ephemeral = true
	m, err := opts.NewManager(ctx, cfg, log)
	if err != nil {
		msg := err.Error()
		if e := sandbox.AsError(err); e.Hint != "" {
			msg += " (hint: " + e.Hint + ")"
		}
		fmt.Fprintf(opts.Stderr, "agentbox: could not start a local engine: %s (hint: `agentbox serve` runs one engine that every client shares)\n", msg)
		return runExitCodes[api.CodeRuntimeUnavailable]
	}
	defer m.Close()
	fmt.Fprintf(opts.Stderr, "agentbox: MCP server on stdio, over a local engine (runtimes %v)\n", m.Tiers())
	return mcpExit(opts, daemon.ServeMCPLocal(ctx, m, stdio))
}

func mcpExit(opts MCPOptions, err error) int {
	if err != nil {
		fmt.Fprintf(opts.Stderr, "agentbox mcp: %v\n", err)
		return exitFailure
	}
	return exitOK
}

func mcpCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "add" || args[0] == "list" || args[0] == "remove" || args[0] == "approve") {
		return mcpHostCmd(ctx, args[0], args[1:], stdout, stderr)
	}
	opts := MCPOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr}
	fs := newFlagSet("mcp", `Usage: agentbox mcp [flags]
       agentbox mcp add|list|remove|approve ... (hosted MCP servers: agentbox mcp add -h)

Serves agentbox's tools to an MCP client (Claude Desktop, an IDE, an agent) over stdio: run code,
sessions, their files, images, egress intents and the audit log. Start it from the client's
configuration; it speaks MCP on stdin and stdout and logs to stderr.

The tools call the daemon at AGENTBOX_URL (default http://127.0.0.1:8420), as its API key, when
one answers; otherwise an engine started in this process, for as long as the client stays. The
daemon also serves the same tools over streamable HTTP at /mcp (Authorization: Bearer KEY).

Claude Desktop (claude_desktop_config.json):
  {"mcpServers": {"agentbox": {"command": "agentbox", "args": ["mcp"]}}}`, stderr)
	fs.StringVar(&opts.URL, "url", "", "daemon `URL` (default $AGENTBOX_URL or http://127.0.0.1:8420)")
	fs.BoolVar(&opts.Local, "local", false, "do not look for a daemon; serve with a local engine")
	fs.StringVar(&opts.DataDir, "data-dir", "", "data `DIR` of the local engine and of the API key file (default $AGENTBOX_DATA_DIR or ~/.cache/agentbox)")
	fs.StringVar(&opts.ConfigFile, "config", "", "configuration `FILE` of the local engine (JSON)")
	fs.StringVar(&opts.LogLevel, "log-level", "warn", "log `level` on stderr: debug, info (a line per tool call), warn or error")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "agentbox mcp: unexpected argument %q (agentbox mcp -h for help)\n", pos[0])
		return exitUsage
	}
	return ServeMCP(ctx, opts)
}
