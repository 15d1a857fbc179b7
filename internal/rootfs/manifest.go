package rootfs

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Manifest describes a built image. It is read from the image itself after the build (Debian's
// package database and the Python distributions' metadata), so it says what is there, not what
// the recipe asked for.
type Manifest struct {
	Name        string   `json:"name"`
	Hash        string   `json:"hash"`
	Description string   `json:"description,omitempty"`
	Suite       string   `json:"suite"`
	Mirror      string   `json:"mirror"`
	Recipe      []string `json:"recipe"`
	// NPMRecipe are the recipe's npm packages (name@version), installed under NPMDir.
	NPMRecipe []string  `json:"npm_recipe,omitempty"`
	Built     time.Time `json:"built"`
	// BuildTime is how long debootstrap and the image steps took.
	BuildTime time.Duration `json:"build_time"`
	// SizeBytes is the root file system's size on disk.
	SizeBytes     int64  `json:"size_bytes"`
	PythonVersion string `json:"python_version"`
	// Debian maps every installed Debian package to its version.
	Debian map[string]string `json:"debian"`
	// Python lists the importable distributions (numpy, pandas...) by normalised name.
	Python map[string]PyDist `json:"python"`
	// GuestSHA256 is the hash of the guest agent in the image.
	GuestSHA256 string `json:"guest_sha256"`
	// ErofsGuestSHA256 is the guest agent in the image's EROFS copy (erofs.go); the copy is used
	// only while it is GuestSHA256.
	ErofsGuestSHA256 string `json:"erofs_guest_sha256,omitempty"`
}

// PyDist is one Python distribution in an image.
type PyDist struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Modules are its top-level import names, when the metadata says.
	Modules []string `json:"modules,omitempty"`
	// Debian is the package that installed it.
	Debian string `json:"debian,omitempty"`
}

const manifestFile = "manifest.json"

// ReadManifest reads DIR/manifest.json.
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(b, &m)
}

func (m Manifest) write(dir string) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, manifestFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, manifestFile))
}

// readDebian parses var/lib/dpkg/status of a root file system: installed packages and versions.
func readDebian(rootfs string) (map[string]string, error) {
	f, err := os.Open(filepath.Join(rootfs, "var/lib/dpkg/status"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var pkg, ver, status string
	flush := func() {
		if pkg != "" && ver != "" && strings.HasSuffix(status, " installed") {
			out[pkg] = ver
		}
		pkg, ver, status = "", "", ""
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			flush()
		case strings.HasPrefix(line, "Package: "):
			pkg = strings.TrimPrefix(line, "Package: ")
		case strings.HasPrefix(line, "Version: "):
			ver = strings.TrimPrefix(line, "Version: ")
		case strings.HasPrefix(line, "Status: "):
			status = strings.TrimPrefix(line, "Status: ")
		}
	}
	flush()
	return out, sc.Err()
}

var normRE = regexp.MustCompile(`[-_.]+`)

// Normalize is PEP 503's normalisation of a distribution name.
func Normalize(name string) string {
	return normRE.ReplaceAllString(strings.ToLower(strings.TrimSpace(name)), "-")
}

// readPython finds the Python distributions in the image's dist-packages: each *.dist-info or
// *.egg-info names the distribution and its version (METADATA or PKG-INFO) and often its import
// names (top_level.txt). Debian's package database says which package installed it; where the
// metadata's version is a placeholder (0.0.0, as some Debian builds leave it), the Debian upstream
// version stands in.
func readPython(rootfs string, debian map[string]string) map[string]PyDist {
	out := map[string]PyDist{}
	owners := dpkgOwners(rootfs)
	for _, dir := range []string{"usr/lib/python3/dist-packages", "usr/local/lib/python3/dist-packages"} {
		ents, err := os.ReadDir(filepath.Join(rootfs, dir))
		if err != nil {
			continue
		}
		for _, e := range ents {
			n := e.Name()
			var meta string
			switch {
			case strings.HasSuffix(n, ".dist-info"):
				meta = "METADATA"
			case strings.HasSuffix(n, ".egg-info"):
				meta = "PKG-INFO"
				if !e.IsDir() {
					meta = ""
				}
			default:
				continue
			}
			p := filepath.Join(rootfs, dir, n)
			var name, version string
			metaPath := p
			if meta != "" {
				metaPath = filepath.Join(p, meta)
			}
			if b, err := os.ReadFile(metaPath); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					if line == "" {
						break // the headers end at the first empty line
					}
					if v, ok := strings.CutPrefix(line, "Name: "); ok && name == "" {
						name = strings.TrimSpace(v)
					}
					if v, ok := strings.CutPrefix(line, "Version: "); ok && version == "" {
						version = strings.TrimSpace(v)
					}
				}
			}
			if name == "" {
				continue
			}
			d := PyDist{Name: name, Version: version, Debian: owners["/"+filepath.Join(dir, n)]}
			if b, err := os.ReadFile(filepath.Join(p, "top_level.txt")); err == nil {
				for _, m := range strings.Fields(string(b)) {
					if !strings.HasPrefix(m, "_") {
						d.Modules = append(d.Modules, m)
					}
				}
				sort.Strings(d.Modules)
			}
			if (d.Version == "" || d.Version == "0.0.0") && d.Debian != "" {
				d.Version = upstreamVersion(debian[d.Debian])
			}
			out[Normalize(name)] = d
		}
	}
	return out
}

// upstreamVersion strips a Debian version's epoch and revision: 1:1.24.2-1+deb12u1 → 1.24.2.
func upstreamVersion(v string) string {
	if _, rest, ok := strings.Cut(v, ":"); ok {
		v = rest
	}
	if i := strings.LastIndexByte(v, '-'); i > 0 {
		v = v[:i]
	}
	return v
}

// dpkgOwners maps the dist-packages metadata paths to the Debian package that installed them,
// from var/lib/dpkg/info/*.list.
func dpkgOwners(rootfs string) map[string]string {
	out := map[string]string{}
	lists, _ := filepath.Glob(filepath.Join(rootfs, "var/lib/dpkg/info/python3*.list"))
	for _, l := range lists {
		pkg := strings.TrimSuffix(filepath.Base(l), ".list")
		pkg, _, _ = strings.Cut(pkg, ":") // multi-arch suffix
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasSuffix(line, ".dist-info") || strings.HasSuffix(line, ".egg-info") {
				out[line] = pkg
			}
		}
	}
	return out
}

// pythonVersion reads the default python3's version from the Debian database.
func pythonVersion(debian map[string]string) string {
	return upstreamVersion(debian["python3"])
}
