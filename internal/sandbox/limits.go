package sandbox

import (
	"fmt"
	"path"
	"strings"
	"time"
)

// Policy is the server's view of limits: what a request gets when it says nothing, and the most
// it may ask for. It also bounds the request itself (code size, input files).
type Policy struct {
	Defaults Limits
	Max      Limits
	// MinMemoryBytes is the smallest memory cap a request may ask for: an interpreter parked and
	// ready already holds tens of MiB (nano: ~34 MiB of linear memory), so a smaller cap could not
	// be kept.
	MinMemoryBytes int64
	// MaxCodeBytes bounds the code of one run.
	MaxCodeBytes int
	// MaxFiles and MaxFileBytes bound the input files of one run.
	MaxFiles     int
	MaxFileBytes int64
}

// DefaultPolicy is what a daemon applies unless configured otherwise. The defaults suit an agent's
// typical step (a few seconds of logic, small outputs); the maxima keep one request from taking the
// machine.
func DefaultPolicy() Policy {
	return Policy{
		Defaults: Limits{
			Timeout:     30 * time.Second,
			MemoryBytes: 256 << 20,
			StdoutBytes: 1 << 20,
			StderrBytes: 1 << 20,
			FilesBytes:  64 << 20,
		},
		Max: Limits{
			Timeout:     10 * time.Minute,
			MemoryBytes: 2 << 30,
			StdoutBytes: 16 << 20,
			StderrBytes: 16 << 20,
			FilesBytes:  512 << 20,
		},
		MinMemoryBytes: 64 << 20,
		MaxCodeBytes:   1 << 20,
		MaxFiles:       100,
		MaxFileBytes:   32 << 20,
	}
}

// Apply fills the zero fields of l from the defaults and checks every field against the maximum.
func (p Policy) Apply(l Limits) (Limits, error) {
	type field struct {
		name, unit string
		v          *int64
		def, max   int64
		scale      float64
	}
	t, dt, mt := int64(l.Timeout), int64(p.Defaults.Timeout), int64(p.Max.Timeout)
	fields := []field{
		{"timeout", "s", &t, dt, mt, float64(time.Second)},
		{"memory", "MiB", &l.MemoryBytes, p.Defaults.MemoryBytes, p.Max.MemoryBytes, 1 << 20},
		{"stdout limit", "bytes", &l.StdoutBytes, p.Defaults.StdoutBytes, p.Max.StdoutBytes, 1},
		{"stderr limit", "bytes", &l.StderrBytes, p.Defaults.StderrBytes, p.Max.StderrBytes, 1},
		{"files limit", "bytes", &l.FilesBytes, p.Defaults.FilesBytes, p.Max.FilesBytes, 1},
	}
	for _, f := range fields {
		switch {
		case *f.v < 0:
			return l, Errorf(KindInvalidRequest, "%s must not be negative", f.name)
		case *f.v == 0:
			*f.v = f.def
		case f.max > 0 && *f.v > f.max:
			return l, Errorf(KindInvalidRequest, "%s %s is above the server's maximum of %s",
				f.name, fmtUnit(*f.v, f.scale, f.unit), fmtUnit(f.max, f.scale, f.unit)).
				WithHint("ask for at most %s, or raise the maximum in the daemon's configuration", fmtUnit(f.max, f.scale, f.unit))
		}
	}
	if l.MemoryBytes < p.MinMemoryBytes {
		return l, Errorf(KindInvalidRequest, "memory %s is below the minimum of %s",
			fmtUnit(l.MemoryBytes, 1<<20, "MiB"), fmtUnit(p.MinMemoryBytes, 1<<20, "MiB")).
			WithHint("ask for at least %s", fmtUnit(p.MinMemoryBytes, 1<<20, "MiB"))
	}
	l.Timeout = time.Duration(t)
	return l, nil
}

func fmtUnit(v int64, scale float64, unit string) string {
	return fmt.Sprintf("%g %s", float64(v)/scale, unit)
}

// CheckRequest validates what a run request carries, apart from its limits.
func (p Policy) CheckRequest(req *RunRequest) error {
	if err := checkContext(req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Code) == "" && !req.ContextReset && !req.ContextEnd {
		return Errorf(KindInvalidRequest, "code is empty").WithHint("send the Python source in the \"code\" field")
	}
	if len(req.Code) > p.MaxCodeBytes {
		return Errorf(KindInvalidRequest, "code is %d bytes, above the limit of %d bytes", len(req.Code), p.MaxCodeBytes).
			WithHint("send large data as a file instead of inlining it in the code")
	}
	if len(req.Files) > p.MaxFiles {
		return Errorf(KindInvalidRequest, "%d input files, above the limit of %d", len(req.Files), p.MaxFiles).
			WithHint("pack the files into one archive")
	}
	seen := map[string]bool{}
	for _, f := range req.Files {
		clean, err := CleanPath(f.Path)
		if err != nil {
			return err
		}
		if seen[clean] {
			return Errorf(KindInvalidRequest, "input file %q is given twice", f.Path)
		}
		seen[clean] = true
		if int64(len(f.Content)) > p.MaxFileBytes {
			return Errorf(KindInvalidRequest, "input file %q is %d bytes, above the limit of %d bytes", f.Path, len(f.Content), p.MaxFileBytes)
		}
	}
	if err := CheckPackages(req.Packages, req.Image); err != nil {
		return err
	}
	return CheckEnv(req.Env)
}

// CheckPackages validates the package and image names of a request: names only, no versions or
// URLs: packages are chosen among built images or installed on demand by name from the
// daemon's configured index, never from a URL a request names.
func CheckPackages(packages []string, image string) error {
	if len(packages) > 64 {
		return Errorf(KindInvalidRequest, "%d packages requested, above the limit of 64", len(packages))
	}
	names := packages
	if image != "" {
		names = append([]string{image}, packages...)
	}
	for _, n := range names {
		if !validName(n) {
			return Errorf(KindInvalidRequest, "package or image name %q is invalid", n).
				WithHint("give names only (\"pandas\", \"scikit-learn\"), without versions, URLs or paths")
		}
	}
	return nil
}

func validName(n string) bool {
	if n == "" || len(n) > 100 {
		return false
	}
	for _, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// CheckEnv validates environment variables given to a sandbox.
func CheckEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return Errorf(KindInvalidRequest, "environment variable name %q is invalid", k)
		}
		if strings.ContainsRune(v, 0) {
			return Errorf(KindInvalidRequest, "environment variable %s: values must not contain NUL bytes", k)
		}
	}
	return nil
}

// CleanPath turns a file path of a request into an absolute, clean path inside the sandbox:
// relative paths are taken from WorkDir. Paths that climb out with "..", empty names and NUL bytes
// are refused.
func CleanPath(p string) (string, error) {
	if p == "" || strings.ContainsRune(p, 0) {
		return "", Errorf(KindInvalidRequest, "file path %q is invalid", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", Errorf(KindInvalidRequest, "file path %q must not contain \"..\"", p).
				WithHint("use a path under %s", WorkDir)
		}
	}
	if !path.IsAbs(p) {
		p = path.Join(WorkDir, p)
	}
	p = path.Clean(p)
	if p == "/" {
		return "", Errorf(KindInvalidRequest, "file path %q names the root directory", p)
	}
	return p, nil
}
