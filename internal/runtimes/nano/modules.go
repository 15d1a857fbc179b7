package nano

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/digest"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

//go:embed probe.py
var probeScript string

// ModulesFile, inside Artifacts.Dir, records what the build can import.
const ModulesFile = "modules.json"

func (a Artifacts) Modules() string { return filepath.Join(a.Dir, ModulesFile) }

// ModuleList is what a probe of the build found it can import. It is measured by importing each
// candidate in the build's own interpreter (probe.py), never typed by hand.
type ModuleList struct {
	// Build identifies the interpreter probed: the sha256 of each of its files. A rebuilt
	// interpreter no longer matches, and its list must be made again.
	Build map[string]string `json:"build"`
	// Python is the build's sys.version; Version its sys.version_info[:3].
	Python  string `json:"python"`
	Version [3]int `json:"version"`
	// Available are the modules that imported: top-level names and the submodules of packages.
	Available []string `json:"available"`
	// Unavailable maps what did not import to its error ("ModuleNotFoundError: No module named
	// '_ssl'").
	Unavailable map[string]string `json:"unavailable"`
	// Probed is when, and ProbeTime how long it took.
	Probed    time.Time     `json:"probed"`
	ProbeTime time.Duration `json:"probe_time"`
}

// ErrNoModules says the module list is missing or describes another build.
var ErrNoModules = errors.New("nano: no module list for this build")

// BuildHashes returns the sha256 of the build's files (the module, and the standard library zip
// of builds that keep it outside).
func (a Artifacts) BuildHashes() (map[string]string, error) {
	out := map[string]string{}
	files := []string{WasmFile}
	if a.HasStdlib() {
		files = append(files, StdlibFile)
	}
	for _, f := range files {
		sum, err := digest.File(filepath.Join(a.Dir, f))
		if err != nil {
			return nil, err
		}
		out[f] = sum
	}
	return out, nil
}

// ReadModules reads the module list and checks that it describes the build in a.Dir. A missing
// or stale list is ErrNoModules (wrapped with what is wrong).
func ReadModules(a Artifacts) (ModuleList, error) {
	var m ModuleList
	b, err := os.ReadFile(a.Modules())
	if errors.Is(err, os.ErrNotExist) {
		return m, fmt.Errorf("%w: %s does not exist", ErrNoModules, a.Modules())
	}
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%w: %s: %v", ErrNoModules, a.Modules(), err)
	}
	have, err := a.BuildHashes()
	if err != nil {
		return m, err
	}
	if !sameHashes(have, m.Build) {
		return m, fmt.Errorf("%w: %s was made for another build of the interpreter", ErrNoModules, a.Modules())
	}
	if len(m.Available) == 0 {
		return m, fmt.Errorf("%w: %s lists no module", ErrNoModules, a.Modules())
	}
	return m, nil
}

func sameHashes(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// WriteModules writes the module list atomically, readable by all.
func WriteModules(a Artifacts, m ModuleList) error {
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return err
	}
	tmp := a.Modules() + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, a.Modules())
}

// RunFunc runs one request in nano: a Runtime's Run (jailed workers) or an in-process instance.
type RunFunc func(ctx context.Context, req *sandbox.RunRequest) (*sandbox.Result, error)

// probeLimits are generous: the probe imports some 500 modules (about a second at -O2).
var probeLimits = sandbox.Limits{
	Timeout:     2 * time.Minute,
	MemoryBytes: 512 << 20,
	StdoutBytes: 16 << 20,
	StderrBytes: 1 << 20,
	FilesBytes:  16 << 20,
}

// ProbeModules imports every candidate module in the build through run and returns what
// imported. a names the build, for its hashes.
func ProbeModules(ctx context.Context, a Artifacts, run RunFunc) (ModuleList, error) {
	build, err := a.BuildHashes()
	if err != nil {
		return ModuleList{}, err
	}
	start := time.Now()
	res, err := run(ctx, &sandbox.RunRequest{Code: probeScript, Tier: Tier, Limits: probeLimits})
	if err != nil {
		return ModuleList{}, fmt.Errorf("nano: module probe: %w", err)
	}
	if res.Error != nil || res.ExitCode != 0 {
		return ModuleList{}, fmt.Errorf("nano: module probe failed (exit %d): %s", res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	var out struct {
		Python      string            `json:"python"`
		Version     []int             `json:"version"`
		Available   []string          `json:"available"`
		Unavailable map[string]string `json:"unavailable"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		return ModuleList{}, fmt.Errorf("nano: module probe printed no result: %v", err)
	}
	m := ModuleList{Build: build, Python: out.Python, Available: out.Available, Unavailable: out.Unavailable,
		Probed: time.Now().UTC().Truncate(time.Second), ProbeTime: time.Since(start).Round(time.Millisecond)}
	copy(m.Version[:], out.Version)
	if len(m.Available) == 0 {
		return ModuleList{}, fmt.Errorf("nano: module probe found nothing importable")
	}
	return m, nil
}

// InProcess returns a RunFunc that runs each request in a new interpreter of this process, for
// setup and tests, where the code is ours: the daemon runs guests only in jailed workers. Close
// the engine with the returned function.
func InProcess(ctx context.Context, a Artifacts) (RunFunc, func(), error) {
	cfg := engine.Config{WasmPath: a.Wasm(), CacheDir: a.CacheDir()}
	if a.HasStdlib() {
		cfg.StdlibPath = a.Stdlib()
	}
	e, err := engine.New(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	run := func(ctx context.Context, req *sandbox.RunRequest) (*sandbox.Result, error) {
		inst, err := e.NewInstance(ctx, engine.InstanceOptions{})
		if err != nil {
			return nil, err
		}
		defer inst.Close()
		return inst.Run(ctx, &engine.Request{Code: req.Code, Files: req.Files, Env: req.Env, Limits: req.Limits})
	}
	return run, func() { e.Close(context.Background()) }, nil
}
