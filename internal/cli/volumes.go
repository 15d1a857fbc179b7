package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentbox-dev/agentbox/api"
)

// volumeFlag is one --volume NAME=/PATH[:ro] of `agentbox sessions create`.
type volumeFlag map[string]string

func (f volumeFlag) String() string { return "" }

func (f volumeFlag) Set(s string) error {
	name, path, ok := strings.Cut(s, "=")
	if !ok || name == "" || path == "" {
		return fmt.Errorf("want NAME=/PATH or NAME=/PATH:ro, e.g. data=/mnt/data")
	}
	f[name] = path
	return nil
}

func volumesCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const synopsis = `Usage: agentbox volumes list
       agentbox volumes create NAME [--quota SIZE]
       agentbox volumes rm NAME...
       agentbox volumes put NAME PATH FILE|-
       agentbox volumes get NAME PATH

Named volumes on the daemon: file systems of your tenant's that outlive sessions and daemon
restarts, mounted into heavy sessions (agentbox sessions create --volume data=/mnt/data, or
data=/mnt/data:ro read-only). One session mounts a volume read-write at a time, or any number
read-only. put and get move a file in or out without a session.

Examples:
  agentbox volumes create data --quota 1G
  agentbox volumes put data in/prices.csv prices.csv
  id=$(agentbox sessions create --volume data=/mnt/data)
  echo "print(open('/mnt/data/in/prices.csv').read()[:80])" | agentbox sessions run "$id" -`
	if len(args) == 0 {
		fmt.Fprintln(stderr, synopsis)
		return exitUsage
	}
	sub, rest := args[0], args[1:]
	var opts DaemonOptions
	var jsonOut bool
	quota := mebibytesFlag(0)
	fs := newFlagSet("volumes "+sub, synopsis, stderr)
	fs.StringVar(&opts.URL, "url", "", "daemon `URL` (default $AGENTBOX_URL or http://127.0.0.1:8420)")
	fs.StringVar(&opts.DataDir, "data-dir", "", "data `DIR` whose api_key file holds the key (default $AGENTBOX_DATA_DIR or ~/.cache/agentbox)")
	want := map[string]int{"list": 0, "create": 1, "put": 3, "get": 2}
	switch sub {
	case "list", "create":
		fs.BoolVar(&jsonOut, "json", false, "print the answer as JSON")
		if sub == "create" {
			fs.Var(&quota, "quota", "the volume's size in `MiB` or with a unit (1G) (default: the server's, 256M)")
		}
	case "rm", "put", "get":
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, synopsis)
		return exitOK
	default:
		fmt.Fprintf(stderr, "agentbox volumes: unknown subcommand %q\n\n%s\n", sub, synopsis)
		return exitUsage
	}
	pos, err := parseInterleaved(fs, rest)
	if err != nil {
		return flagExit(err)
	}
	if n, ok := want[sub]; (ok && len(pos) != n) || (sub == "rm" && len(pos) == 0) {
		fmt.Fprintf(stderr, "agentbox volumes %s: wrong arguments %q\n\n%s\n", sub, strings.Join(pos, " "), synopsis)
		return exitUsage
	}
	c, err := opts.client()
	if err != nil {
		fmt.Fprintf(stderr, "agentbox volumes: %v\n", err)
		return exitUsage
	}
	switch sub {
	case "list":
		vs, err := c.Volumes(ctx)
		if err != nil {
			return apiFailure(ctx, stderr, "volumes list", err)
		}
		if jsonOut {
			printJSON(stdout, api.VolumeList{Volumes: vs})
			return exitOK
		}
		if len(vs) == 0 {
			fmt.Fprintln(stdout, "no volumes (agentbox volumes create NAME makes one)")
			return exitOK
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tQUOTA\tMOUNTED\tCREATED")
		for _, v := range vs {
			mounted := "-"
			switch {
			case v.MountedRW > 0:
				mounted = "read-write"
			case v.MountedRO > 0:
				mounted = fmt.Sprintf("read-only x%d", v.MountedRO)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.Name, fmtBytes(v.QuotaBytes), mounted, v.CreatedAt.Local().Format(time.DateTime))
		}
		tw.Flush()
		return exitOK
	case "create":
		v, err := c.CreateVolume(ctx, pos[0], int64(quota)<<20)
		if err != nil {
			return apiFailure(ctx, stderr, "volumes create", err)
		}
		if jsonOut {
			printJSON(stdout, v)
			return exitOK
		}
		fmt.Fprintf(stdout, "%s\n", v.Name)
		fmt.Fprintf(stderr, "agentbox: volume %s of %s (agentbox sessions create --volume %s=/mnt/%s)\n", v.Name, fmtBytes(v.QuotaBytes), v.Name, v.Name)
		return exitOK
	case "rm":
		code := exitOK
		for _, name := range pos {
			if err := c.DeleteVolume(ctx, name); err != nil {
				code = apiFailure(ctx, stderr, "volumes rm", err)
			}
		}
		return code
	case "put":
		var b []byte
		if pos[2] == "-" {
			b, err = io.ReadAll(stdin)
		} else {
			b, err = os.ReadFile(pos[2])
		}
		if err != nil {
			fmt.Fprintf(stderr, "agentbox volumes put: %v\n", err)
			return exitUsage
		}
		if err := c.WriteVolumeFile(ctx, pos[0], pos[1], b); err != nil {
			return apiFailure(ctx, stderr, "volumes put", err)
		}
		return exitOK
	}
	b, err := c.ReadVolumeFile(ctx, pos[0], pos[1])
	if err != nil {
		return apiFailure(ctx, stderr, "volumes get", err)
	}
	stdout.Write(b)
	return exitOK
}

// fmtBytes is a size for people: "256 MiB", "1.5 GiB".
func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.4g GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.4g MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d B", n)
}
