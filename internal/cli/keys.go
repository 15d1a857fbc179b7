package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// KeysOptions are the flags of `agentbox keys` and what tests replace.
type KeysOptions struct {
	ConfigFile, DataDir string
	// Tenant, Agent, Scopes and TTL describe a key to create.
	Tenant, Agent string
	Scopes        []auth.Scope
	TTL           time.Duration
	Out           io.Writer
	Now           func() time.Time
}

// KeysCreate makes a tenant key, records its hash in the key file and prints the key, once: the
// file keeps only the hash, so a lost key is rotated, not recovered.
func KeysCreate(opts KeysOptions) error {
	path, err := keysPath(opts)
	if err != nil {
		return err
	}
	key, _, err := auth.CreateKey(path, opts.Tenant, opts.Agent, opts.Scopes, opts.TTL, opts.Now())
	if err != nil {
		return keysError(err, path)
	}
	fmt.Fprintf(opts.Out, "%s\n", key)
	return nil
}

// KeysList prints the keys of the key file: ids, tenants, agents, scopes and states, never keys.
func KeysList(opts KeysOptions) error {
	path, err := keysPath(opts)
	if err != nil {
		return err
	}
	recs, err := auth.ReadKeyFile(path)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		fmt.Fprintf(opts.Out, "no tenant keys in %s (the daemon's own key is the only key)\n", path)
		return nil
	}
	now := opts.Now()
	tw := tabwriter.NewWriter(opts.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTENANT\tAGENT\tSCOPES\tCREATED\tSTATE")
	for _, r := range recs {
		if opts.Tenant != "" && r.Tenant != opts.Tenant {
			continue
		}
		state := "active"
		switch {
		case r.Revoked != nil:
			state = "revoked " + r.Revoked.Format(time.RFC3339)
		case r.Expires != nil && !now.Before(*r.Expires):
			state = "expired " + r.Expires.Format(time.RFC3339)
		case r.Expires != nil:
			state = "expires " + r.Expires.Format(time.RFC3339)
		}
		scopes := make([]string, len(r.Scopes))
		for i, s := range r.Scopes {
			scopes[i] = string(s)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Tenant, dash(r.Agent), strings.Join(scopes, ","),
			r.Created.Format(time.RFC3339), state)
	}
	return tw.Flush()
}

// KeysRevoke revokes a key: the daemon refuses it from its next request on.
func KeysRevoke(opts KeysOptions, id string) error {
	path, err := keysPath(opts)
	if err != nil {
		return err
	}
	_, err = auth.RevokeKey(path, id, opts.Now())
	return keysError(err, path)
}

// KeysRotate revokes a key and prints a new one for the same tenant, agent and scopes (and
// lifetime, counted from now).
func KeysRotate(opts KeysOptions, id string) error {
	path, err := keysPath(opts)
	if err != nil {
		return err
	}
	key, _, err := auth.RotateKey(path, id, opts.Now())
	if err != nil {
		return keysError(err, path)
	}
	fmt.Fprintf(opts.Out, "%s\n", key)
	return nil
}

// keysError says which key file an unknown key was looked for in; other errors pass.
func keysError(err error, path string) error {
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return fmt.Errorf("%v in %s (agentbox keys list)", err, path)
	}
	return err
}

// systemConfig is the configuration of a system install (scripts/install-system.sh). Tests move
// it.
var systemConfig = "/etc/agentbox/config.json"

// keysPath is the key file of the daemon the command is about: the one --config, --data-dir or
// AGENTBOX_DATA_DIR names; else that of the user's own daemon when there is one (its data directory
// has an api_key), else the system install's when there is one (as clients find their key: their
// own first, then the system's); else the user's default.
func keysPath(opts KeysOptions) (string, error) {
	if opts.ConfigFile == "" && opts.DataDir == "" && os.Getenv("AGENTBOX_DATA_DIR") == "" {
		if _, err := os.Stat(filepath.Join(config.DefaultDataDir(), apiKeyFile)); err != nil {
			if _, err := os.Stat(systemConfig); err == nil {
				opts.ConfigFile = systemConfig
			}
		}
	}
	cfg, err := loadConfig(opts.ConfigFile, "", opts.DataDir)
	if err != nil {
		return "", err
	}
	return cfg.KeysPath(), nil
}

// scopesFlag reads --scopes run,sessions.
type scopesFlag struct{ s *[]auth.Scope }

func (f scopesFlag) String() string {
	if f.s == nil {
		return ""
	}
	var out []string
	for _, s := range *f.s {
		out = append(out, string(s))
	}
	return strings.Join(out, ",")
}

func (f scopesFlag) Set(v string) error {
	*f.s = nil
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*f.s = append(*f.s, auth.Scope(s))
		}
	}
	return nil
}

func keysCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	synopsis := `Usage: agentbox keys create --tenant T [--agent A] [--scopes run,sessions] [--expires 720h]
       agentbox keys list [--tenant T]
       agentbox keys revoke ID
       agentbox keys rotate ID

Tenant keys: each belongs to a tenant, may name an agent, and has scopes (run, sessions, files,
egress-intent, policy-admin, audit-read, admin). A tenant's key sees only its tenant's sessions,
artifacts and audit records; another tenant's are not found. The key file (DATA_DIR/keys.json,
mode 0600) keeps each key's SHA-256, never the key: create and rotate print the key once. The
daemon reads the file again when it changes, so a revoked key is refused from its next request.
The daemon's own key (api_key) stays an admin of every tenant. The daemon is the one of --config
or --data-dir; by default this user's own (~/.cache/agentbox), else the system install's
(sudo agentbox keys ... changes /var/lib/agentbox/keys.json). The HTTP API does the same at
/v1/keys with a key that has the admin scope.`
	if len(args) == 0 || !slices.Contains([]string{"create", "list", "revoke", "rotate"}, args[0]) {
		fmt.Fprintln(stderr, synopsis)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return exitOK
		}
		return exitUsage
	}
	sub := args[0]
	opts := KeysOptions{Out: stdout, Now: time.Now, Scopes: []auth.Scope{auth.ScopeRun, auth.ScopeSessions, auth.ScopeFiles}}
	fs := newFlagSet("keys "+sub, synopsis, stderr)
	fs.StringVar(&opts.DataDir, "data-dir", "", "data `DIR` (default $AGENTBOX_DATA_DIR, else ~/.cache/agentbox if it has an api_key, else a system install's (/etc/agentbox/config.json))")
	fs.StringVar(&opts.ConfigFile, "config", "", "daemon configuration `FILE` (JSON)")
	switch sub {
	case "create":
		fs.StringVar(&opts.Tenant, "tenant", "", "the `TENANT` the key belongs to (required)")
		fs.StringVar(&opts.Agent, "agent", "", "the `AGENT` the key is issued to, for the audit log")
		fs.Var(scopesFlag{&opts.Scopes}, "scopes", "comma-separated `SCOPES` (default run,sessions,files)")
		fs.DurationVar(&opts.TTL, "expires", 0, "the key expires after `DURATION` (default never)")
	case "list":
		fs.StringVar(&opts.Tenant, "tenant", "", "only the keys of `TENANT`")
	}
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return flagExit(err)
	}
	switch {
	case (sub == "revoke" || sub == "rotate") && len(pos) != 1:
		fmt.Fprintf(stderr, "agentbox keys %s: give the key's ID (agentbox keys list)\n", sub)
		return exitUsage
	case (sub == "create" || sub == "list") && len(pos) > 0:
		fmt.Fprintf(stderr, "agentbox keys %s: unexpected argument %q\n", sub, pos[0])
		return exitUsage
	case sub == "create" && opts.Tenant == "":
		fmt.Fprintln(stderr, "agentbox keys create: --tenant is required")
		return exitUsage
	}
	switch sub {
	case "create":
		err = KeysCreate(opts)
	case "list":
		err = KeysList(opts)
	case "revoke":
		err = KeysRevoke(opts, pos[0])
	case "rotate":
		err = KeysRotate(opts, pos[0])
	}
	if err != nil {
		fmt.Fprintf(stderr, "agentbox keys %s: %v\n", sub, err)
		return exitFailure
	}
	return exitOK
}
