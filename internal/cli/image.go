package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/agentbox-dev/agentbox/images"
	"github.com/agentbox-dev/agentbox/internal/rootfs"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
)

// ImageOptions are the flags of `agentbox image build|list`.
type ImageOptions struct {
	ConfigFile string
	DataDir    string
	// Build: the image name (a recipe under images/), the guest agent binary (default: found as
	// heavy.Layout.FindGuest says), the Debian mirror (default: apt's), and whether to rebuild a
	// cached root file system.
	Name   string
	Guest  string
	Mirror string
	Force  bool
	// List: print JSON instead of a table; Packages also lists every Python distribution.
	JSON     bool
	Packages bool
	Out      io.Writer
}

// ImageBuild builds (or refreshes from the cache) the named image.
func ImageBuild(ctx context.Context, opts ImageOptions) error {
	cfg, err := loadConfig(opts.ConfigFile, "", opts.DataDir)
	if err != nil {
		return err
	}
	r, err := rootfs.LoadRecipe(opts.Name)
	if err != nil {
		return err
	}
	l := heavy.LayoutFor(cfg.DataDir)
	guest, err := l.FindGuest(opts.Guest)
	if err != nil {
		return err
	}
	start := time.Now()
	img, built, err := l.Images().Build(ctx, r, rootfs.BuildOptions{Guest: guest, Mirror: opts.Mirror, Force: opts.Force, Out: opts.Out})
	if err != nil {
		return err
	}
	how := "cached"
	if built {
		how = "built"
	}
	fmt.Fprintf(opts.Out, "%s %s (%s) in %v: %s\n", how, r.Name, img.Manifest.Hash, time.Since(start).Round(time.Millisecond), img.Manifest.Offer(6))
	return nil
}

// ImageList prints the built images with their package versions, read from each image's manifest.
func ImageList(opts ImageOptions) error {
	cfg, err := loadConfig(opts.ConfigFile, "", opts.DataDir)
	if err != nil {
		return err
	}
	imgs, err := heavy.LayoutFor(cfg.DataDir).Images().List()
	if err != nil {
		return err
	}
	if opts.JSON {
		ms := make([]rootfs.Manifest, 0, len(imgs))
		for _, i := range imgs {
			ms = append(ms, i.Manifest)
		}
		enc := json.NewEncoder(opts.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(ms)
	}
	if len(imgs) == 0 {
		fmt.Fprintf(opts.Out, "no images built; recipes: %s (agentbox image build NAME)\n", strings.Join(images.Names(), ", "))
		return nil
	}
	tw := tabwriter.NewWriter(opts.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tHASH\tBUILT\tSIZE\tPACKAGES")
	for _, i := range imgs {
		m := i.Manifest
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d MiB\t%s\n", m.Name, m.Hash, m.Built.Format("2006-01-02 15:04"), m.SizeBytes>>20, m.Offer(4))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if opts.Packages {
		for _, i := range imgs {
			fmt.Fprintf(opts.Out, "\n%s: Python distributions\n", i.Manifest.Name)
			var names []string
			for _, d := range i.Manifest.Python {
				names = append(names, fmt.Sprintf("  %-24s %-14s %s", d.Name, d.Version, d.Debian))
			}
			sort.Slice(names, func(a, b int) bool { return strings.ToLower(names[a]) < strings.ToLower(names[b]) })
			fmt.Fprintln(opts.Out, strings.Join(names, "\n"))
		}
	}
	return nil
}

// ImagePrune removes builds of images other than each one's current build. It refuses while a
// daemon holds the heavy tier's state directory, since that daemon may run sandboxes on an old
// build.
func ImagePrune(opts ImageOptions) error {
	cfg, err := loadConfig(opts.ConfigFile, "", opts.DataDir)
	if err != nil {
		return err
	}
	hc, err := heavy.ConfigFrom(cfg)
	if err != nil {
		return err
	}
	// This data directory's daemon, and every cluster node sharing its artifacts (DATA_DIR/nodes/ID).
	states := []string{hc.StateDirOf(cfg.DataDir)}
	if hc.StateDir == "" {
		nodes, _ := filepath.Glob(filepath.Join(cfg.DataDir, "nodes", "*", "heavy"))
		states = append(states, nodes...)
	}
	for _, state := range states {
		f, err := os.Open(filepath.Join(state, "run", ".lock"))
		if err != nil {
			continue
		}
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			return fmt.Errorf("a daemon uses %s and may run sandboxes on an old build: stop it first", state)
		}
		defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	}
	pruned, err := heavy.LayoutFor(cfg.DataDir).Images().Prune()
	var total int64
	for _, p := range pruned {
		fmt.Fprintf(opts.Out, "removed %s (%d MiB)\n", p.Path, p.Bytes>>20)
		total += p.Bytes
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.Out, "%d old builds removed, %d MiB freed\n", len(pruned), total>>20)
	return nil
}

func imageCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	synopsis := `Usage: agentbox image build NAME [flags]
       agentbox image list [flags]
       agentbox image prune [flags]

build makes the heavy tier's image NAME from its recipe (images/NAME/recipe: a Debian package
list) with debootstrap from the machine's Debian mirror, adds the guest agent, and caches it by
a hash of the recipe: building an unchanged recipe again is instant. Needs root.
list shows the built images with the versions of their packages.
prune removes old builds of each image (a changed recipe keeps the previous build, ~1.2 GB); it
refuses while a daemon uses the data directory.

Recipes: ` + strings.Join(images.Names(), ", ")
	if len(args) == 0 || (args[0] != "build" && args[0] != "list" && args[0] != "prune") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprintln(stdout, synopsis)
			return exitOK
		}
		fmt.Fprintln(stderr, synopsis)
		return exitUsage
	}
	sub := args[0]
	opts := ImageOptions{Out: stdout}
	fs := newFlagSet("image "+sub, synopsis, stderr)
	fs.StringVar(&opts.ConfigFile, "config", "", "daemon configuration `FILE` (JSON)")
	fs.StringVar(&opts.DataDir, "data-dir", "", "data `DIR` (default $AGENTBOX_DATA_DIR or ~/.cache/agentbox)")
	if sub == "build" {
		fs.StringVar(&opts.Guest, "guest", "", "guest agent `BINARY` (default: agentbox-guest next to agentbox, in the data directory, or on PATH)")
		fs.StringVar(&opts.Mirror, "mirror", "", "Debian mirror `URL` (default: the one apt is configured with)")
		fs.BoolVar(&opts.Force, "force", false, "rebuild the root file system even if this recipe is cached")
	} else if sub == "list" {
		fs.BoolVar(&opts.JSON, "json", false, "print the manifests as JSON")
		fs.BoolVar(&opts.Packages, "packages", false, "also list every Python distribution with its version")
	}
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return flagExit(err)
	}
	switch {
	case sub == "build" && len(pos) != 1:
		fmt.Fprintf(stderr, "agentbox image build: want one image name (recipes: %s)\n", strings.Join(images.Names(), ", "))
		return exitUsage
	case sub != "build" && len(pos) != 0:
		fmt.Fprintf(stderr, "agentbox image %s: unexpected argument %q\n", sub, pos[0])
		return exitUsage
	}
	if sub == "build" {
		opts.Name = pos[0]
		if os.Geteuid() != 0 {
			fmt.Fprintln(stderr, "agentbox image build: needs root (debootstrap and chroot)")
			return exitFailure
		}
		err = ImageBuild(ctx, opts)
	} else if sub == "prune" {
		err = ImagePrune(opts)
	} else {
		err = ImageList(opts)
	}
	if err != nil {
		fmt.Fprintf(stderr, "agentbox image %s: %v\n", sub, err)
		return exitFailure
	}
	return exitOK
}
