package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// ManagerFactory builds the engine from a configuration; daemon.NewManager is the real one.
type ManagerFactory func(ctx context.Context, cfg config.Config, log *slog.Logger) (*sandbox.Audited, error)

// ServeOptions are the flags of `agentbox serve` and what tests replace.
type ServeOptions struct {
	// ConfigFile is the daemon configuration (JSON); empty means defaults and environment.
	ConfigFile string
	// Listen and DataDir override the configuration when not empty.
	Listen  string
	DataDir string
	// Cluster sets this process's part in a cluster (--role, --node-id, --advertise, --shared-dir,
	// --discovery); its fields override the configuration and environment when not empty.
	Cluster config.ClusterConfig
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string
	// LogJSON writes logs as JSON lines instead of text.
	LogJSON bool
	// ShutdownTimeout bounds the wait for running requests at shutdown. Default 30s.
	ShutdownTimeout time.Duration
	// Stderr receives the log and the startup lines.
	Stderr io.Writer
	// NewManager builds the engine. Default daemon.NewManager.
	NewManager ManagerFactory
	// Ready, if set, is called with the bound address once the server accepts requests.
	Ready func(addr net.Addr)
	// E2B overrides the configuration's E2B front door (config.E2BConfig) where not empty.
	E2B config.E2BConfig
	// E2BReady, if set, is called with the E2B front door's own listener's address.
	E2BReady func(addr net.Addr)
}

// Serve runs the daemon until ctx is done, then shuts down gracefully: no new requests, running
// ones get up to ShutdownTimeout, then the engine is closed. The daemon package builds the
// engine, the front doors and the listener; Serve adds what a command does around them (the
// configuration, the API key, the startup lines, SIGHUP).
func Serve(ctx context.Context, opts ServeOptions) error {
	if opts.NewManager == nil {
		opts.NewManager = daemon.NewManager
	}
	log, err := newLogger(opts.Stderr, opts.LogLevel, opts.LogJSON)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(opts.ConfigFile, opts.Listen, opts.DataDir, clusterFlags(opts.Cluster))
	if err != nil {
		return err
	}
	if err := overrideE2B(&cfg, opts.E2B); err != nil {
		return err
	}
	switch cfg.Cluster.Role {
	case config.RoleGateway:
		return serveGateway(ctx, opts, cfg, log)
	case config.RoleNode:
		if _, _, s3, _ := cfg.Cluster.S3Bucket(); !s3 {
			if err := os.MkdirAll(cfg.Cluster.StoreURL(), 0o700); err != nil {
				return fmt.Errorf("shared dir: %w", err)
			}
		}
	}
	key, err := ensureAPIKey(cfg.APIKey, cfg.DataDir)
	if err != nil {
		return err
	}
	if key.warning != "" {
		log.Warn(key.warning)
	}
	cfg.APIKey = key.key

	// Listen before the engine starts, so a busy port fails at once, not after the warm-up.
	ln, err := daemon.Listen(cfg.Listen, log)
	if err != nil {
		return err
	}
	defer ln.Close()
	if cfg.Cluster.Role == config.RoleNode && cfg.Cluster.Advertise == "" {
		// The address other nodes find this one at, written into its sessions' shared records.
		cfg.Cluster.Advertise = "http://" + ln.Addr().String()
	}
	var e2bLn net.Listener
	if cfg.E2B.Listen != "" {
		if e2bLn, err = daemon.Listen(cfg.E2B.Listen, log); err != nil {
			return fmt.Errorf("E2B front door: %w", err)
		}
		defer e2bLn.Close()
	}
	var debugLns []debugListener
	if cfg.E2B.Debug {
		if debugLns, err = listenE2BDebug(); err != nil {
			return err
		}
		defer func() {
			for _, d := range debugLns {
				d.ln.Close()
			}
		}()
	}

	start := time.Now()
	m, err := opts.NewManager(ctx, cfg, log)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	defer m.Close()
	hosted, err := daemon.OpenHostedMCP(cfg, m)
	if err != nil {
		return fmt.Errorf("hosted MCP servers: %w", err)
	}
	defer hosted.Close()
	doors, err := daemon.NewFrontDoors(m, daemon.FrontDoorOptions{
		HostedMCP:       hosted,
		APIKey:          cfg.APIKey,
		KeysFile:        cfg.KeysPath(),
		UISessionsFile:  filepath.Join(cfg.StatePath(), "ui", "sessions.json"),
		UISharedLogins:  uiSharedLogins(cfg),
		MaxBodyBytes:    cfg.MaxBodyBytes,
		Version:         version(),
		Logger:          log,
		ShutdownTimeout: opts.ShutdownTimeout,
		E2B:             e2bOptions(cfg, key.path),
		Node:            daemon.NodeOptionsOf(cfg, ln.Addr()),
	})
	if err != nil {
		return err
	}
	defer doors.Close()

	switch {
	case key.path == "":
		fmt.Fprintf(opts.Stderr, "agentbox: API key from AGENTBOX_API_KEY\n")
	case key.created:
		fmt.Fprintf(opts.Stderr, "agentbox: created a new API key in %s (clients of this user find it there)\n", key.path)
	default:
		fmt.Fprintf(opts.Stderr, "agentbox: API key in %s\n", key.path)
	}
	role := ""
	if cfg.Cluster.Role == config.RoleNode {
		role = fmt.Sprintf("node %s, state in %s, ", cfg.Cluster.NodeID, cfg.StatePath())
	}
	fmt.Fprintf(opts.Stderr, "agentbox: listening on http://%s (%sruntimes %v, ready in %v)\n",
		ln.Addr(), role, m.Tiers(), time.Since(start).Round(time.Millisecond))
	if opts.Ready != nil {
		opts.Ready(ln.Addr())
	}
	e2bDone := serveE2B(ctx, opts, cfg, doors, e2bLn, "E2B front door")
	if e2bLn == nil {
		if cfg.E2B.Domain != "" {
			fmt.Fprintf(opts.Stderr, "agentbox: E2B front door for api.%s and *.%s on the main listener\n", cfg.E2B.Domain, cfg.E2B.Domain)
		}
	}
	// SIGHUP reloads the egress policy, as daemons do their configuration.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			if _, err := m.ReloadEgressPolicy(); err != nil {
				log.Error("SIGHUP", "err", err)
			}
		}
	}()
	debugDone := make(chan error, len(debugLns))
	for _, d := range debugLns {
		go func() { debugDone <- doors.ServeE2BDebug(ctx, d.ln, d.port) }()
	}
	if len(debugLns) > 0 {
		fmt.Fprintf(opts.Stderr, "agentbox: E2B debug mode (E2B_DEBUG=true) on localhost ports 3000, 49983, 49999\n")
	}
	if err := doors.Serve(ctx, ln); err != nil {
		return err
	}
	if err := <-e2bDone; err != nil {
		log.Warn("E2B front door", "err", err)
	}
	for range debugLns {
		if err := <-debugDone; err != nil {
			log.Warn("E2B debug listener", "err", err)
		}
	}
	if err := m.Close(); err != nil {
		log.Warn("closing the engine", "err", err)
	}
	log.Info("stopped")
	return nil
}

// debugListener is a listener of the E2B SDKs' debug mode and the port it serves.
type debugListener struct {
	ln   net.Listener
	port int
}

// listenE2BDebug opens the debug mode's listeners: ports 3000, 49983 and 49999 of 127.0.0.1 and
// of ::1 (the SDK connects to "localhost", which may be either); ::1 is skipped on a machine
// without IPv6.
// serveE2B serves the E2B front door on a listener of its own (--e2b-listen), a node's or a
// gateway's (what names it in the start-up line), and returns where its end is reported: nil at
// once when there is no such listener.
func serveE2B(ctx context.Context, opts ServeOptions, cfg config.Config, doors *daemon.FrontDoors, ln net.Listener, what string) <-chan error {
	done := make(chan error, 1)
	if ln == nil {
		done <- nil
		return done
	}
	scheme := "http"
	if cfg.E2B.TLSCert != "" {
		scheme = "https"
	}
	fmt.Fprintf(opts.Stderr, "agentbox: %s on %s://%s (domain %q)\n", what, scheme, ln.Addr(), cfg.E2B.Domain)
	if opts.E2BReady != nil {
		opts.E2BReady(ln.Addr())
	}
	go func() { done <- doors.ServeE2B(ctx, ln, cfg.E2B.TLSCert, cfg.E2B.TLSKey) }()
	return done
}

func listenE2BDebug() ([]debugListener, error) {
	var out []debugListener
	for _, port := range daemon.E2BDebugPorts {
		for _, host := range []string{"127.0.0.1", "::1"} {
			ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
			if err != nil {
				if host == "::1" {
					continue
				}
				for _, d := range out {
					d.ln.Close()
				}
				return nil, fmt.Errorf("E2B debug mode: %w", err)
			}
			out = append(out, debugListener{ln, port})
		}
	}
	return out, nil
}

// uiSharedLogins is where a cluster's nodes keep the console's logins, so that a login on one is
// valid on all (the gateway sends a session's pages to its node): their shared storage.
func uiSharedLogins(cfg config.Config) string {
	if cfg.Cluster.Role != config.RoleNode || cfg.Cluster.SharedDir == "" {
		return ""
	}
	return filepath.Join(cfg.Cluster.SharedDir, "ui", "logins")
}

// e2bOptions are the E2B front door's options: the configuration's, its records kept in the data
// directory (unless sessions are ephemeral), and the users allowed in debug mode: root, this process's user and the owner of the
// key file.
func e2bOptions(cfg config.Config, keyPath string) daemon.E2BOptions {
	o := daemon.E2BOptionsFrom(cfg.E2B)
	if !cfg.Sessions.Ephemeral {
		// In the node's own data directory (DATA_DIR/nodes/ID on a cluster's node, which may
		// share DATA_DIR with others): sessions outlive the daemon, and so do these.
		o.StateFile = filepath.Join(cfg.StatePath(), "e2b", "sandboxes.json")
	}
	o.DebugUIDs = append(o.DebugUIDs, uint32(os.Geteuid()))
	if keyPath != "" {
		if st, err := os.Stat(keyPath); err == nil {
			if sys, ok := st.Sys().(*syscall.Stat_t); ok {
				o.DebugUIDs = append(o.DebugUIDs, sys.Uid)
			}
		}
	}
	return o
}

// overrideE2B applies the E2B flags over the configuration.
func overrideE2B(cfg *config.Config, o config.E2BConfig) error {
	for dst, v := range map[*string]string{&cfg.E2B.Domain: o.Domain, &cfg.E2B.Listen: o.Listen,
		&cfg.E2B.TLSCert: o.TLSCert, &cfg.E2B.TLSKey: o.TLSKey} {
		if v != "" {
			*dst = v
		}
	}
	cfg.E2B.Debug = cfg.E2B.Debug || o.Debug
	return cfg.Validate()
}

func newLogger(w io.Writer, level string, asJSON bool) (*slog.Logger, error) {
	var l slog.Level
	if level == "" {
		level = "info"
	}
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", level)
	}
	o := &slog.HandlerOptions{Level: l}
	if asJSON {
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return slog.New(slog.NewTextHandler(w, o)), nil
}

func serveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts := ServeOptions{Stderr: stderr}
	fs := newFlagSet("serve", `Usage: agentbox serve [flags]

Starts the daemon: the HTTP API (api/openapi.yaml) with warm interpreters. Every route but
GET /v1/health needs "Authorization: Bearer KEY". The key is AGENTBOX_API_KEY if set; otherwise
the daemon creates one on first start in DATA_DIR/api_key (mode 0600) and reuses it later, and
clients of the same user find it there. Stop with Ctrl-C or SIGTERM: running requests get up to
--shutdown-timeout to finish.`, stderr)
	fs.StringVar(&opts.Listen, "listen", "", "`ADDR`ess to listen on (default 127.0.0.1:8420, or AGENTBOX_LISTEN)")
	fs.StringVar(&opts.DataDir, "data-dir", "", "data `DIR` for runtime files and the API key (default $AGENTBOX_DATA_DIR or ~/.cache/agentbox)")
	fs.StringVar(&opts.ConfigFile, "config", "", "configuration `FILE` (JSON; see internal/config)")
	fs.StringVar(&opts.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&opts.LogJSON, "log-json", false, "write the log as JSON lines")
	fs.StringVar(&opts.E2B.Domain, "e2b-domain", "", "serve E2B's SDKs for `DOMAIN` (E2B_DOMAIN): api.DOMAIN and PORT-SANDBOXID.DOMAIN (or AGENTBOX_E2B_DOMAIN)")
	fs.StringVar(&opts.E2B.Listen, "e2b-listen", "", "a listener `ADDR` of the E2B front door's own (or AGENTBOX_E2B_LISTEN)")
	fs.StringVar(&opts.E2B.TLSCert, "e2b-tls-cert", "", "certificate `FILE` (PEM) for --e2b-listen: api.DOMAIN and *.DOMAIN")
	fs.BoolVar(&opts.E2B.Debug, "e2b-debug", false, "serve E2B's SDKs in debug mode (E2B_DEBUG=true): localhost ports 3000, 49983 and 49999 (or AGENTBOX_E2B_DEBUG=1)")
	fs.StringVar(&opts.E2B.TLSKey, "e2b-tls-key", "", "private key `FILE` (PEM) of --e2b-tls-cert")
	fs.StringVar(&opts.Cluster.Role, "role", "", "`ROLE` in a cluster: node (runs sandboxes for a gateway) or gateway (stateless, before the nodes); default a single machine (or AGENTBOX_ROLE)")
	fs.StringVar(&opts.Cluster.NodeID, "node-id", "", "a node's `ID` ([a-z0-9]{1,32}); its session ids carry it and its state is DATA_DIR/nodes/ID (or AGENTBOX_NODE_ID)")
	fs.StringVar(&opts.Cluster.Advertise, "advertise", "", "the base `URL` a node is reached at (default http:// + the listen address, or AGENTBOX_ADVERTISE)")
	fs.StringVar(&opts.Cluster.Discovery, "discovery", "", "how a gateway finds its nodes (`SPEC`): static:n1=URL,n2=URL | nomad:SERVICE | kube:NAMESPACE/SERVICE (or AGENTBOX_DISCOVERY)")
	fs.StringVar(&opts.Cluster.SharedDir, "shared-dir", "", "storage every node sees (`DIR`), for sessions that move between nodes (or AGENTBOX_SHARED_DIR)")
	fs.StringVar(&opts.Cluster.Store, "store", "", "the same storage as a `URL`: s3://BUCKET/PREFIX (with cluster.s3 in the config, or AGENTBOX_S3_ENDPOINT, AGENTBOX_S3_REGION, AGENTBOX_S3_PATH_STYLE, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AGENTBOX_S3_CREDENTIALS_FILE) or a directory (or AGENTBOX_STORE)")
	fs.DurationVar(&opts.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long running requests may take to finish at shutdown")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "agentbox serve: unexpected argument %q\n", pos[0])
		return exitUsage
	}
	if err := Serve(ctx, opts); err != nil {
		msg := err.Error()
		if strings.Contains(msg, "address already in use") {
			msg += " (is another agentbox serve running? choose another --listen address)"
		}
		fmt.Fprintf(stderr, "agentbox serve: %s\n", msg)
		return exitFailure
	}
	return exitOK
}

// clusterFlags lays the cluster flags given over the configuration and environment.
func clusterFlags(c config.ClusterConfig) func(*config.Config) {
	return func(cfg *config.Config) {
		for from, to := range map[*string]*string{&c.Role: &cfg.Cluster.Role, &c.NodeID: &cfg.Cluster.NodeID,
			&c.Advertise: &cfg.Cluster.Advertise, &c.SharedDir: &cfg.Cluster.SharedDir, &c.Store: &cfg.Cluster.Store, &c.Discovery: &cfg.Cluster.Discovery} {
			if *from != "" {
				*to = *from
			}
		}
	}
}

// serveGateway runs `agentbox serve --role gateway`: no engine, no state on disk; the same key
// (AGENTBOX_API_KEY, or the data directory's key file) and keys file as the nodes.
func serveGateway(ctx context.Context, opts ServeOptions, cfg config.Config, log *slog.Logger) error {
	// A key of its own would match no node's: the gateway reads the nodes' key, never makes one.
	if cfg.APIKey == "" {
		if _, err := os.Stat(filepath.Join(cfg.DataDir, apiKeyFile)); err != nil {
			return fmt.Errorf("a gateway needs the nodes' API key: set AGENTBOX_API_KEY (or give --data-dir of a node whose api_key it should use)")
		}
	}
	key, err := ensureAPIKey(cfg.APIKey, cfg.DataDir)
	if err != nil {
		return err
	}
	if key.warning != "" {
		log.Warn(key.warning)
	}
	ln, err := daemon.Listen(cfg.Listen, log)
	if err != nil {
		return err
	}
	defer ln.Close()
	start := time.Now()
	// The gateway's own E2B listener, as a node's --e2b-listen: E2B requests are forwarded to
	// the nodes under their E2B domain's names, so it needs that domain.
	var e2bLn net.Listener
	if cfg.E2B.Listen != "" {
		if cfg.E2B.Domain == "" {
			return fmt.Errorf("--e2b-listen on a gateway needs --e2b-domain (or AGENTBOX_E2B_DOMAIN): the nodes' E2B domain, under whose names the gateway forwards E2B requests")
		}
		if e2bLn, err = daemon.Listen(cfg.E2B.Listen, log); err != nil {
			return err
		}
		defer e2bLn.Close()
	}
	doors, gw, err := daemon.NewGatewayDoors(ctx, cfg, daemon.FrontDoorOptions{
		APIKey: key.key, KeysFile: cfg.KeysPath(), MaxBodyBytes: cfg.MaxBodyBytes, Version: version(),
		Logger: log, ShutdownTimeout: opts.ShutdownTimeout,
	})
	if err != nil {
		return err
	}
	defer gw.Close()
	fmt.Fprintf(opts.Stderr, "agentbox: gateway listening on http://%s (nodes from %s, ready in %v)\n",
		ln.Addr(), cfg.Cluster.Discovery, time.Since(start).Round(time.Millisecond))
	e2bDone := serveE2B(ctx, opts, cfg, doors, e2bLn, "gateway E2B front door")
	if opts.Ready != nil {
		opts.Ready(ln.Addr())
	}
	if err := doors.Serve(ctx, ln); err != nil {
		return err
	}
	if err := <-e2bDone; err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}
