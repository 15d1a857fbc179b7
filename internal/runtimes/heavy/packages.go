package heavy

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/rootfs"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Packages on demand. A request for packages no built image has runs on the default image, if it
// has pip, and installs them with pip in its own sandbox before the code runs: pip (and whatever
// the index serves) never runs on the host. Only wheels are taken (--only-binary=:all:), so no
// setup.py runs even in the sandbox before the user's code does.
//
// The wheels pip fetched are handed back to the host and kept per daemon under
// DATA_DIR/heavy/wheels/KEY, KEY naming the index and the requested set: the next install of the
// same set gets them in the install run itself and installs with --no-index, without the gateway
// or the index. Wheels go in and out through the run's own frames (the code and its stdout), not a
// shared bind mount, so no sandbox can write into what another one installs from, and the cache
// is written only by the daemon from an install run that started in a fresh sandbox before any of
// the user's code.

// DefaultPackageIndex is where packages come from unless the configuration names a mirror.
const DefaultPackageIndex = "https://pypi.org/simple"

// IndexPolicy is what the heavy tier asks an Egress that can tell whether a profile lets sandboxes
// reach the package index (optional: without it, the gateway decides at the first request).
type IndexPolicy interface {
	// CheckIndex returns a policy_violation naming the index when profile does not allow it.
	CheckIndex(profile, index string) error
}

// FailureReporter is what the heavy tier asks an Egress that can say why a session's request
// could not reach its origin (optional): an install that failed so names the cause, where pip
// says only that it found no version.
type FailureReporter interface {
	// LastFailure is the reason of the session's last such failure at or after since, or "".
	LastFailure(session string, since time.Time) string
}

// pkgDir is where the wheel cache lives.
func (rt *Runtime) pkgDir() string { return filepath.Join(rt.layout.Dir, "wheels") }

// index is the package index the daemon installs from.
func (rt *Runtime) index() string {
	if rt.opts.PackageIndex != "" {
		return rt.opts.PackageIndex
	}
	return DefaultPackageIndex
}

// pickOnDemand is pick, except that packages no image has are to be installed on demand into the
// default image, when it has pip and no image was named. It returns those packages.
func (rt *Runtime) pickOnDemand(packages []string, name string) (rootfs.Image, []string, error) {
	img, err := rt.pick(packages, name)
	if err == nil || (name != "" && name != rt.img.Manifest.Name) || !rt.img.Manifest.Has("pip") {
		return img, nil, err
	}
	var missing []string
	for _, p := range packages {
		if !rt.img.Manifest.Has(p) {
			missing = append(missing, p)
		}
	}
	return rt.img, missing, nil
}

var normRe = regexp.MustCompile(`[-_.]+`)

// cacheKey names the cache entry of a set of packages from an index.
func cacheKey(index string, pkgs []string) string {
	names := make([]string, len(pkgs))
	for i, p := range pkgs {
		names[i] = normRe.ReplaceAllString(strings.ToLower(p), "-")
	}
	slices.Sort(names)
	names = slices.Compact(names)
	h := sha256.Sum256([]byte(index + "\n" + strings.Join(names, "\n")))
	return hex.EncodeToString(h[:8])
}

// installScript runs in the sandbox's Python process as the user: it installs the packages into
// a user base under /tmp (the image's own site-packages belong to root) and puts it on sys.path,
// so the next cell imports them. ARGS: {"pkgs", "index" ("" = offline from "wheels"), "wheels"}.
const installScript = `
import base64 as _b, json as _j, os as _o, subprocess as _s, sys as _y, tempfile as _t, importlib as _i
def _agentbox_install(a):
    base = "/tmp/.agentbox-packages"
    w = _t.mkdtemp(prefix=".agentbox-wheels-")
    for n, d in a["wheels"].items():
        with open(_o.path.join(w, _o.path.basename(n)), "wb") as f:
            f.write(_b.b64decode(d))
    env = dict(_o.environ, PYTHONUSERBASE=base, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1",
               PIP_BREAK_SYSTEM_PACKAGES="1", PIP_ROOT_USER_ACTION="ignore", PIP_NO_CACHE_DIR="1",
               PIP_RETRIES="2", PIP_TIMEOUT="30")
    def pip(*args):
        p = _s.run([_y.executable, "-m", "pip", *args], env=env, capture_output=True, text=True)
        if p.returncode:
            print(_j.dumps({"ok": False, "step": args[0], "error": (p.stderr or p.stdout)[-4000:]}))
            return False
        return True
    if a["index"]:
        rep = _o.path.join(_t.mkdtemp(), "report.json")
        if not pip("install", "--user", "--dry-run", "--quiet", "--only-binary=:all:", "--index-url", a["index"], "--report", rep, *a["pkgs"]):
            return
        with open(rep) as f:
            reqs = [x["metadata"]["name"] + "==" + x["metadata"]["version"] for x in _j.load(f).get("install", [])]
        if reqs and not pip("download", "--quiet", "--no-deps", "--only-binary=:all:", "--index-url", a["index"], "--dest", w, *reqs):
            return
    if not pip("install", "--user", "--quiet", "--no-index", "--only-binary=:all:", "--find-links", w, *a["pkgs"]):
        return
    site = _o.path.join(base, "lib", "python%d.%d" % _y.version_info[:2], "site-packages")
    if site not in _y.path:
        _y.path.insert(0, site)
    _i.invalidate_caches()
    out = {}
    if a["index"]:
        for n in _o.listdir(w):
            if n.endswith(".whl"):
                with open(_o.path.join(w, n), "rb") as f:
                    out[n] = _b.b64encode(f.read()).decode()
    print(_j.dumps({"ok": True, "wheels": out}))
_agentbox_install(_j.loads(_b.b64decode("ARGS")))
del _agentbox_install
`

// installOutcome is what the install script prints.
type installOutcome struct {
	OK     bool              `json:"ok"`
	Step   string            `json:"step"`
	Error  string            `json:"error"`
	Wheels map[string][]byte `json:"wheels"`
}

var noDistRe = regexp.MustCompile(`(?:No matching distribution found for|Could not find a version that satisfies the requirement) ([A-Za-z0-9_.\-]+)`)

// install installs pkgs into b before the request's code runs, from the wheel cache when it holds
// the set, else from the index through the egress gateway under profile (opened for the install
// alone when the request has no network). It returns the routing reasons that say where they came
// from.
func (rt *Runtime) install(ctx context.Context, b *box, pkgs []string, id, profile string, network bool) ([]string, error) {
	index := rt.index()
	if profile == "" {
		profile = sandbox.DefaultEgressProfile
	}
	dir := filepath.Join(rt.pkgDir(), cacheKey(index, pkgs))
	args := map[string]any{"pkgs": pkgs, "index": "", "wheels": map[string][]byte{}}
	cached := false
	if ents, err := os.ReadDir(dir); err == nil {
		wheels := map[string][]byte{}
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".whl") {
				data, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					return nil, fmt.Errorf("heavy: wheel cache: %w", err)
				}
				wheels[e.Name()] = data
			}
		}
		args["wheels"], cached = wheels, true
	}
	// The profile must allow the index even when the cache holds the set: the wheels came from
	// there, and a profile that keeps its sandboxes off an index keeps its packages out too.
	if ip, ok := rt.opts.Egress.(IndexPolicy); ok && rt.opts.Egress != nil {
		if err := ip.CheckIndex(profile, index); err != nil {
			return nil, err
		}
	}
	if !cached {
		if rt.opts.Egress == nil {
			return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "no image has %s, and this daemon has no egress gateway to install them from the package index %s", strings.Join(pkgs, ", "), index).
				WithHint("ask for packages an image has (GET /v1/images), or enable egress in the daemon's configuration")
		}
		if err := rt.checkEgress(profile); err != nil {
			return nil, err
		}
		if !network {
			if err := rt.enableEgress(ctx, b, id, profile); err != nil {
				return nil, err
			}
			defer func() {
				// The code itself runs without the network it did not ask for.
				b.egress.mu.Lock()
				b.egress.on = false
				b.egress.mu.Unlock()
			}()
		}
		args["index"] = index
	}
	raw, _ := json.Marshal(args)
	code := strings.Replace(installScript, `"ARGS"`, `"`+base64.StdEncoding.EncodeToString(raw)+`"`, 1)
	timeout := rt.opts.PackageTimeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, timeout+time.Second)
	defer cancel()
	res, _, err := b.run(rctx, &sandbox.RunRequest{Code: code, Limits: sandbox.Limits{Timeout: timeout, StdoutBytes: 512 << 20, StderrBytes: 64 << 10}}, false, time.Second, nil)
	if err != nil {
		return nil, fmt.Errorf("heavy: installing %s: %w", strings.Join(pkgs, ", "), err)
	}
	var out installOutcome
	line := strings.TrimSpace(res.Stdout)
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	// The index could not be reached through the gateway: that is the cause, whatever pip made
	// of it (no version found, or its proxy hanging up).
	if fr, ok := rt.opts.Egress.(FailureReporter); ok && !cached && (res.Error != nil || json.Unmarshal([]byte(line), &out) != nil || !out.OK) {
		if why := fr.LastFailure(id, start); why != "" {
			return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "installing %s: the egress gateway could not reach the package index %s: %s", strings.Join(pkgs, ", "), index, why).
				WithHint("check that this daemon's machine reaches the index (heavy.package_index, egress.hosts), then retry")
		}
	}
	if res.Error != nil || json.Unmarshal([]byte(line), &out) != nil {
		why := res.Stderr
		if res.Error != nil {
			why = res.Error.Name + ": " + res.Error.Value
		}
		return nil, sandbox.Errorf(sandbox.KindInternal, "installing %s failed in the sandbox: %s", strings.Join(pkgs, ", "), strings.TrimSpace(why))
	}
	if !out.OK {
		pkg := strings.Join(pkgs, ", ")
		if m := noDistRe.FindStringSubmatch(out.Error); m != nil {
			pkg = m[1]
		}
		from := "the package index " + index
		if cached {
			from = "the daemon's wheel cache"
		}
		var offers []string
		for _, img := range rt.images() {
			offers = append(offers, fmt.Sprintf("%s (%s)", img.Manifest.Name, img.Manifest.Offer(8)))
		}
		return nil, sandbox.Errorf(sandbox.KindInvalidRequest, "package %s is in no image and could not be installed from %s: %s; images: %s", pkg, from, lastLines(out.Error, 3), strings.Join(offers, "; ")).
			WithHint("check the package's name on the index, or ask for packages an image has (GET /v1/images)")
	}
	took := time.Since(start).Round(time.Millisecond)
	if cached {
		return []string{fmt.Sprintf("packages %s installed on demand from the daemon's wheel cache (%d wheels, %s)", strings.Join(pkgs, ", "), len(args["wheels"].(map[string][]byte)), took)}, nil
	}
	if err := storeWheels(rt.pkgDir(), dir, out.Wheels); err != nil {
		rt.log.Warn("heavy: cannot keep wheels", "dir", dir, "err", err)
	}
	names := make([]string, 0, len(out.Wheels))
	for n := range out.Wheels {
		names = append(names, n)
	}
	slices.Sort(names)
	return []string{fmt.Sprintf("packages %s installed on demand from %s through the egress gateway (wheels: %s; %s)", strings.Join(pkgs, ", "), index, strings.Join(names, ", "), took)}, nil
}

// storeWheels writes a cache entry whole or not at all.
func storeWheels(root, dir string, wheels map[string][]byte) error {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(root, ".new-")
	if err != nil {
		return err
	}
	for n, data := range wheels {
		if n != filepath.Base(n) || !strings.HasSuffix(n, ".whl") {
			os.RemoveAll(tmp)
			return fmt.Errorf("bad wheel name %q", n)
		}
		if err := os.WriteFile(filepath.Join(tmp, n), data, 0o600); err != nil {
			os.RemoveAll(tmp)
			return err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp) // another install of the same set was first
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
