package rootfs

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/agentbox-dev/agentbox/internal/digest"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// BuildOptions configure a build.
type BuildOptions struct {
	// Guest is the guest agent binary to put into the image (static, see cmd/agentbox-guest).
	Guest string
	// Mirror is the Debian mirror. Default: the machine's apt configuration (Mirror).
	Mirror string
	// Force rebuilds the root file system even if a build of this recipe exists.
	Force bool
	// Out receives progress lines; debootstrap's own output goes to NAME/.build-*/debootstrap.log.
	Out io.Writer
	// Debootstrap runs debootstrap; tests replace it. Default: the debootstrap program.
	Debootstrap func(ctx context.Context, args []string, log io.Writer) error
	// Erofs writes a root file system as an EROFS image; tests replace it. Default MakeErofs.
	Erofs func(ctx context.Context, rootfs, file string, log io.Writer) error
	// NPM installs npm packages into dir (dir/node_modules); tests replace it. Default npmInstall.
	NPM func(ctx context.Context, dir string, pkgs []string, log io.Writer) error
}

// Build makes the image of recipe r, or refreshes the agent of an existing build of the same
// recipe hash. It returns the image and whether the root file system was built (false: cached).
func (s Store) Build(ctx context.Context, r Recipe, opts BuildOptions) (Image, bool, error) {
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Guest == "" {
		return Image{}, false, errors.New("image build: no guest agent binary given")
	}
	if err := checkStatic(opts.Guest); err != nil {
		return Image{}, false, err
	}
	hash := r.Hash()
	dir := filepath.Join(s.Dir, r.Name, hash)
	if _, err := ReadManifest(dir); err == nil && !opts.Force {
		img, err := s.refresh(ctx, dir, r, opts)
		if err == nil {
			fmt.Fprintf(opts.Out, "image %s: recipe %s already built, cached at %s\n", r.Name, hash, dir)
		}
		return img, false, err
	}
	if err := os.MkdirAll(filepath.Join(s.Dir, r.Name), 0o755); err != nil {
		return Image{}, false, err
	}
	if opts.Mirror == "" {
		opts.Mirror = Mirror(r.Suite)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(s.Dir, r.Name, ".build-"+hash+"-"+hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return Image{}, false, err
	}
	ok := false
	defer func() {
		if !ok {
			removeTree(tmp)
		}
	}()
	start := time.Now()
	rootfs := filepath.Join(tmp, "rootfs")
	logf, err := os.Create(filepath.Join(tmp, "debootstrap.log"))
	if err != nil {
		return Image{}, false, err
	}
	defer logf.Close()
	args := []string{"--variant=" + r.Variant, "--include=" + strings.Join(r.Packages, ","), "--cache-dir=" + s.debCache(), r.Suite, rootfs, opts.Mirror}
	if r.Variant == "-" {
		args = args[1:]
	}
	if err := os.MkdirAll(s.debCache(), 0o755); err != nil {
		return Image{}, false, err
	}
	fmt.Fprintf(opts.Out, "image %s: debootstrap %s from %s with %d packages (a few minutes; log in %s)\n", r.Name, r.Suite, opts.Mirror, len(r.Packages), logf.Name())
	run := opts.Debootstrap
	if run == nil {
		run = debootstrap
	}
	if err := run(ctx, args, logf); err != nil {
		return Image{}, false, fmt.Errorf("image %s: debootstrap failed: %w (last lines of %s: %s)", r.Name, err, logf.Name(), tail(logf.Name(), 3))
	}
	fmt.Fprintf(opts.Out, "image %s: debootstrap done in %v\n", r.Name, time.Since(start).Round(time.Second))
	if err := prepareRootfs(ctx, rootfs); err != nil {
		return Image{}, false, fmt.Errorf("image %s: %w", r.Name, err)
	}
	if len(r.NPM) > 0 {
		fmt.Fprintf(opts.Out, "image %s: npm install %s\n", r.Name, strings.Join(r.NPM, " "))
		run := opts.NPM
		if run == nil {
			run = npmInstall
		}
		if err := installNPM(ctx, rootfs, tmp, r.NPM, run, logf); err != nil {
			return Image{}, false, fmt.Errorf("image %s: %w (log: %s)", r.Name, err, tail(logf.Name(), 3))
		}
	}
	m := Manifest{
		Name:        r.Name,
		Hash:        hash,
		Description: r.Description,
		Suite:       r.Suite,
		Mirror:      opts.Mirror,
		Recipe:      r.Packages,
		NPMRecipe:   r.NPM,
		Built:       time.Now().UTC().Truncate(time.Second),
	}
	if err := fillManifest(&m, rootfs); err != nil {
		return Image{}, false, fmt.Errorf("image %s: manifest: %w", r.Name, err)
	}
	if err := installGuest(rootfs, opts.Guest, &m); err != nil {
		return Image{}, false, fmt.Errorf("image %s: %w", r.Name, err)
	}
	m.SizeBytes = duBytes(rootfs)
	makeErofs(ctx, tmp, &m, opts)
	m.BuildTime = time.Since(start).Round(time.Second)
	if err := m.write(tmp); err != nil {
		return Image{}, false, err
	}
	_ = os.Remove(filepath.Join(tmp, "debootstrap.log"))
	old := dir + ".old"
	removeTree(old)
	if _, err := os.Stat(dir); err == nil {
		if err := os.Rename(dir, old); err != nil {
			return Image{}, false, err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return Image{}, false, err
	}
	ok = true
	removeTree(old)
	if err := s.setCurrent(r.Name, hash); err != nil {
		return Image{}, false, err
	}
	fmt.Fprintf(opts.Out, "image %s: built %s in %v, %d MiB, %d Debian packages\n", r.Name, hash, m.BuildTime, m.SizeBytes>>20, len(m.Debian))
	return Image{Dir: dir, Manifest: m}, true, nil
}

// refresh makes an existing build current and gives it the guest agent of this build (and an
// EROFS copy holding it).
func (s Store) refresh(ctx context.Context, dir string, r Recipe, opts BuildOptions) (Image, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return Image{}, err
	}
	sum, err := digest.File(opts.Guest)
	if err != nil {
		return Image{}, err
	}
	if sum != m.GuestSHA256 {
		if err := installGuest(filepath.Join(dir, "rootfs"), opts.Guest, &m); err != nil {
			return Image{}, err
		}
		m.Description = r.Description
		fmt.Fprintf(opts.Out, "image %s: guest agent updated (%s)\n", r.Name, sum[:12])
	}
	// The EROFS copy holds the guest agent too: made again when the agent changed, or made for a
	// build that has none (older, or made where mkfs.erofs was missing).
	if (Image{Dir: dir, Manifest: m}).Erofs() == "" {
		makeErofs(ctx, dir, &m, opts)
	}
	if err := m.write(dir); err != nil {
		return Image{}, err
	}
	if err := s.setCurrent(r.Name, m.Hash); err != nil {
		return Image{}, err
	}
	return Image{Dir: dir, Manifest: m}, nil
}

func (s Store) debCache() string { return filepath.Join(s.Dir, ".debs") }

// debootstrap runs the debootstrap program, installing it with apt first if it is missing.
func debootstrap(ctx context.Context, args []string, log io.Writer) error {
	if err := EnsureDebianPackage(ctx, "debootstrap", "debootstrap", log); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "debootstrap", args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	return cmd.Run()
}

// EnsureDebianPackage installs pkg with apt-get when program is not on PATH. It needs root.
func EnsureDebianPackage(ctx context.Context, program, pkg string, log io.Writer) error {
	if _, err := exec.LookPath(program); err == nil {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s is not installed and installing it needs root: apt-get install %s", program, pkg)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("%s is not installed and there is no apt-get: install the %s package", program, pkg)
	}
	fmt.Fprintf(log, "installing %s with apt-get\n", pkg)
	install := func() error {
		cmd := exec.CommandContext(ctx, "apt-get", "install", "-y", "--no-install-recommends", pkg)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = log, log
		return cmd.Run()
	}
	if err := install(); err != nil {
		// A fresh machine may have no package lists yet.
		upd := exec.CommandContext(ctx, "apt-get", "update")
		upd.Stdout, upd.Stderr = log, log
		if err := upd.Run(); err != nil {
			return fmt.Errorf("apt-get update: %w", err)
		}
		if err := install(); err != nil {
			return fmt.Errorf("apt-get install %s: %w", pkg, err)
		}
	}
	if _, err := exec.LookPath(program); err != nil {
		return fmt.Errorf("installed %s but %s is still not on PATH", pkg, program)
	}
	return nil
}

// prepareRootfs makes a debootstrapped tree into a sandbox root: the unprivileged user the code
// runs as, its home (the work directory), matplotlib's font cache built once, apt's caches
// dropped, and the mount points runsc would otherwise create on the host.
func prepareRootfs(ctx context.Context, rootfs string) error {
	for _, f := range []struct{ file, line string }{
		{"etc/passwd", "user:x:1000:1000:agentbox user:/home/user:/bin/sh"},
		{"etc/group", "user:x:1000:"},
	} {
		if err := appendLine(filepath.Join(rootfs, f.file), f.line); err != nil {
			return err
		}
	}
	for _, d := range []string{"home/user", "var/cache/agentbox/matplotlib", ".agentbox", "proc", "sys", "dev", "tmp"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			return err
		}
	}
	_ = os.Chmod(filepath.Join(rootfs, "tmp"), 0o1777|os.ModeSticky)
	// Warm matplotlib's font list (seconds on first import) when the image has matplotlib.
	if _, err := os.Stat(filepath.Join(rootfs, "usr/lib/python3/dist-packages/matplotlib")); err == nil {
		cmd := exec.CommandContext(ctx, "chroot", rootfs, "/usr/bin/python3", "-c", "import matplotlib.pyplot")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/home/user", "MPLCONFIGDIR=/var/cache/agentbox/matplotlib", "MPLBACKEND=Agg", "LANG=C.UTF-8"}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("warming matplotlib's font cache: %v: %s", err, out)
		}
	}
	for _, d := range []string{"home/user", "var/cache/agentbox/matplotlib"} {
		if err := chownTree(filepath.Join(rootfs, d), 1000, 1000); err != nil {
			return err
		}
	}
	for _, glob := range []string{"var/cache/apt/archives/*.deb", "var/cache/apt/*.bin", "var/lib/apt/lists/*_*"} {
		files, _ := filepath.Glob(filepath.Join(rootfs, glob))
		for _, f := range files {
			os.Remove(f)
		}
	}
	return nil
}

func appendLine(path, line string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	name, _, _ := strings.Cut(line, ":")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name+":") {
			return nil
		}
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func chownTree(dir string, uid, gid int) error {
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// fillManifest reads what the image holds.
func fillManifest(m *Manifest, rootfs string) error {
	deb, err := readDebian(rootfs)
	if err != nil {
		return err
	}
	m.Debian = deb
	m.PythonVersion = pythonVersion(deb)
	m.Python = readPython(rootfs, deb)
	return nil
}

// installGuest copies the agent into the image atomically and records its hash.
func installGuest(rootfs, guest string, m *Manifest) error {
	dst := filepath.Join(rootfs, strings.TrimPrefix(GuestPath, "/"))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(guest)
	if err != nil {
		return fmt.Errorf("guest agent: %w", err)
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(out, h), in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	m.GuestSHA256 = hex.EncodeToString(h.Sum(nil))
	return nil
}

// checkStatic refuses a dynamically linked guest: inside the image its interpreter may be missing
// or different.
func checkStatic(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("guest agent: %w (build it: CGO_ENABLED=0 go build -o agentbox-guest ./cmd/agentbox-guest)", err)
	}
	defer f.Close()
	b := make([]byte, 1<<20)
	n, _ := io.ReadFull(f, b)
	if n < 4 || string(b[:4]) != "\x7fELF" {
		return fmt.Errorf("guest agent %s is not an ELF binary", path)
	}
	if strings.Contains(string(b[:n]), "/lib64/ld-linux") || strings.Contains(string(b[:n]), "/lib/ld-linux") {
		return fmt.Errorf("guest agent %s is dynamically linked: build it with CGO_ENABLED=0", path)
	}
	return nil
}

func duBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	return n
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if lines = append(lines, sc.Text()); len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, " | ")
}

// removeTree removes a build directory, unmounting first whatever a failed debootstrap left
// mounted inside it (proc, sys), so RemoveAll never walks into a live mount.
func removeTree(dir string) {
	if _, err := os.Stat(dir); err != nil {
		return
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		var mounts []string
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
				mounts = append(mounts, f[4])
			}
		}
		sort.Sort(sort.Reverse(sort.StringSlice(mounts)))
		for _, m := range mounts {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
	_ = os.RemoveAll(dir)
}
