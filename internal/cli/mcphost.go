package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/mcphost"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
)

// mcpHostCmd serves `agentbox mcp add|list|remove|approve`: the registry of hosted MCP servers
// under DATA_DIR/mcp (package mcphost).
func mcpHostCmd(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) int {
	var dataDir, image, profile, allow, deny, remote string
	var asJSON bool
	fs := newFlagSet("mcp "+sub, `Usage:
  agentbox mcp add NAME --image IMAGE [--profile EGRESS_PROFILE] [--allow T,..] [--deny T,..] -- COMMAND ARGS...
  agentbox mcp add NAME --url URL [--profile EGRESS_PROFILE] [--allow T,..] [--deny T,..]
  agentbox mcp list [--json]
  agentbox mcp remove NAME
  agentbox mcp approve NAME

Hosted MCP servers: each runs in a gVisor sandbox of its own of IMAGE (node-mcp has Node 22 and
the reference servers: agentbox image build node-mcp), speaking MCP on stdio over the guest
channel, with no network unless --profile names an egress profile. Every call is governed: tool
definitions pinned on first use (a change is refused until 'agentbox mcp approve NAME'), allow
and deny lists, DLP of arguments and results, an audit record in DATA_DIR/mcp/audit.jsonl.

A remote server (--url, streamable HTTP elsewhere) is reached only through the daemon's egress
gateway under its profile (default: the default profile), governed the same way.

Examples:
  agentbox mcp add files --image node-mcp -- mcp-server-filesystem /home/user
  agentbox mcp add docs --url https://mcp.example.com/mcp --profile docs`, stderr)
	fs.StringVar(&dataDir, "data-dir", "", "data `DIR` (default $AGENTBOX_DATA_DIR or ~/.cache/agentbox)")
	fs.StringVar(&image, "image", "", "heavy `IMAGE` the server runs in (add)")
	fs.StringVar(&profile, "profile", "", "egress `PROFILE` (add; default: no network, or the default profile for --url)")
	fs.StringVar(&remote, "url", "", "a remote server's streamable-HTTP endpoint `URL` (add; instead of --image and a command)")
	fs.StringVar(&allow, "allow", "", "only these `TOOLS` may be called, comma-separated (add)")
	fs.StringVar(&deny, "deny", "", "these `TOOLS` may not be called, comma-separated (add)")
	fs.BoolVar(&asJSON, "json", false, "print JSON (list)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return flagExit(err)
	}
	cfg, err := loadConfig("", "", dataDir)
	if err != nil {
		fmt.Fprintf(stderr, "agentbox mcp %s: %v\n", sub, err)
		return exitFailure
	}
	opts := mcphost.Options{Dir: filepath.Join(cfg.DataDir, "mcp")}
	var rt *heavy.Runtime
	if sub == "approve" {
		// Approving lists the server's tools: it is started here, in a sandbox of this process.
		state, err := os.MkdirTemp("", "agentbox-mcp-approve-")
		if err != nil {
			fmt.Fprintf(stderr, "agentbox mcp approve: %v\n", err)
			return exitFailure
		}
		defer os.RemoveAll(state)
		rt, err = heavy.New(ctx, heavy.Options{Layout: heavy.LayoutFor(cfg.DataDir), StateDir: state, Warm: -1})
		if err != nil {
			fmt.Fprintf(stderr, "agentbox mcp approve: the heavy runtime: %v\n", err)
			return exitFailure
		}
		defer rt.Close()
		opts.Spawn = daemon.HostedSpawn(rt)
	}
	m, err := mcphost.Open(opts)
	if err != nil {
		fmt.Fprintf(stderr, "agentbox mcp %s: %v\n", sub, err)
		return exitFailure
	}
	defer m.Close()
	need := func(n int) bool {
		if len(pos) < n {
			fmt.Fprintf(stderr, "agentbox mcp %s: missing arguments (agentbox mcp %s -h)\n", sub, sub)
			return false
		}
		return true
	}
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	switch sub {
	case "add":
		if !need(1) || remote == "" && !need(2) {
			return exitUsage
		}
		s := mcphost.Server{Name: pos[0], Image: image, Profile: profile, Command: pos[1:], URL: remote, Allow: split(allow), Deny: split(deny)}
		if err := m.Add(s); err != nil {
			fmt.Fprintf(stderr, "agentbox mcp add: %v\n", err)
			return exitUsage
		}
		if s.Remote() {
			fmt.Fprintf(stdout, "added %s: remote at %s, through the egress gateway under profile %s; its tools are pinned on first use\n", s.Name, s.URL, s.RemoteProfile())
			break
		}
		fmt.Fprintf(stdout, "added %s: %s in image %s (network: %s); its tools are pinned on first use\n", s.Name, strings.Join(s.Command, " "), s.Image, orNone(s.Profile))
	case "list":
		list := m.List()
		if asJSON {
			_ = json.NewEncoder(stdout).Encode(list)
			return exitOK
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tIMAGE\tNETWORK\tCOMMAND")
		for _, s := range list {
			if s.Remote() {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, "(remote)", s.RemoteProfile(), s.URL)
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, s.Image, orNone(s.Profile), strings.Join(s.Command, " "))
		}
		tw.Flush()
	case "remove":
		if !need(1) {
			return exitUsage
		}
		if err := m.Remove(pos[0]); err != nil {
			fmt.Fprintf(stderr, "agentbox mcp remove: %v\n", err)
			return exitFailure
		}
		fmt.Fprintf(stdout, "removed %s\n", pos[0])
	case "approve":
		if !need(1) {
			return exitUsage
		}
		p, err := m.Approve(ctx, pos[0])
		if err != nil {
			fmt.Fprintf(stderr, "agentbox mcp approve: %v\n", err)
			return exitFailure
		}
		fmt.Fprintf(stdout, "approved %s: %d tools pinned (%s), image %.12s\n", pos[0], len(p.Tools), p.Hash[:12], p.ImageHash)
	}
	return exitOK
}

func orNone(profile string) string {
	if profile == "" {
		return "none"
	}
	return profile
}
