package heavy

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// DefaultPreload are the modules a warm sandbox has imported before it counts as warm: numpy and
// pandas, which take ~1.1 s to import in a sandbox and which most heavy runs use.
//
// matplotlib is left out on purpose, though it would save a run that imports it ~0.2 s (after
// numpy and pandas): the guest's import hook picks matplotlib's backend (the inline one that
// returns figures as artifacts, or the run's own MPLBACKEND) when the code imports it, so an
// import at preload time would fix the backend for every run of the sandbox and ignore a run's
// MPLBACKEND; and a run that never imports matplotlib does not have it loaded. A preloaded module
// also makes os.fork in the sandbox dearer (gVisor copies the touched memory: ~40 ms with numpy
// and pandas against ~13 ms without; subprocess, which uses vfork, is not affected).
var DefaultPreload = []string{"numpy", "pandas"}

// moduleName is a dotted Python module name; nothing else may reach the preload code.
var moduleName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// freezeCode ends the preload: the objects the imports made are collected once and moved to
// Python's permanent generation (gc.freeze, CPython's advice for processes that fork without
// exec). Sandboxes restored from the template share its pages copy-on-write (gVisor, 64 KiB at a
// time), and a cyclic collection that visits a long-lived object writes its header: frozen, the
// preload's tracked objects (50,436 with numpy and pandas in the image) are never visited again,
// so a session's collections copy only the pages of what its own code made. Measured with
// TestMeasureIdleMemory (6 sessions, one run each, the template shared): 41.7 / 42.0 → 40.6 /
// 40.4 / 40.8 MiB per idle session, the sandbox's anonymous memory 17.6 / 18.0 → 16.8 / 16.9 MB.
// What it costs: cycles among the preload's own objects are not collected if the code makes them
// garbage (gc.unfreeze() gives them back).
const freezeCode = "__import__(\"gc\").collect()\n__import__(\"gc\").freeze()\n"

// preloadCode imports mods without binding a name in __main__: a session from the pool starts
// with an empty namespace, as a fresh Python would, and only sys.modules is warm.
func preloadCode(mods []string) (string, error) {
	var b strings.Builder
	for _, m := range mods {
		if !moduleName.MatchString(m) {
			return "", fmt.Errorf("heavy: preload module %q is not a Python module name", m)
		}
		fmt.Fprintf(&b, "__import__(%s)\n", strconv.Quote(m))
	}
	if b.Len() > 0 {
		b.WriteString(freezeCode)
	}
	return b.String(), nil
}

// reseedCode runs in every restored sandbox before it is handed out. Sandboxes restored from
// one checkpoint share its memory, so the seeds that modules drew from the OS when they were
// imported are the same in all of them; drawing them again makes random and numpy.random (and
// tempfile's name sequence) differ between sandboxes, as they do between booted ones. What
// cannot be redrawn in a running process: the str hash seed (PYTHONHASHSEED) and the address
// space layout, which restored sandboxes share (FIGURES.md). Only __main__ is touched, and
// the names are deleted after.
const reseedCode = `import sys as _agentbox_sys
for _agentbox_m in ("random", "numpy.random"):
    if _agentbox_m in _agentbox_sys.modules:
        _agentbox_sys.modules[_agentbox_m].seed()
if "tempfile" in _agentbox_sys.modules:
    _agentbox_sys.modules["tempfile"]._name_sequence = None
del _agentbox_sys, _agentbox_m
`

// prepTimeout bounds the preload of a booted sandbox and the first answer of a restored one.
const prepTimeout = 60 * time.Second

// runQuiet runs code of the daemon's own (preload, reseed) in b as a one-shot cell and fails if
// it raised or printed to stderr. The output caps are small: this code prints nothing.
func (b *box) runQuiet(ctx context.Context, code string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout+time.Second)
	defer cancel()
	req := &sandbox.RunRequest{Code: code, Limits: sandbox.Limits{Timeout: timeout, StdoutBytes: 4 << 10, StderrBytes: 4 << 10}}
	res, _, err := b.run(ctx, req, false, time.Second, nil)
	if err != nil {
		return err
	}
	if res.Error != nil {
		return fmt.Errorf("%s: %s", res.Error.Name, res.Error.Value)
	}
	if res.ExitCode != 0 || res.Stderr != "" {
		return fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	return nil
}

// bootWarm boots a sandbox with the default limits and imports the preload into it: a warm
// sandbox the slow way, and the one a checkpoint is taken of. Both are made in the background.
func (rt *Runtime) bootWarm(ctx context.Context) (*box, error) {
	start := time.Now()
	b, err := rt.startBox(ctx, rt.img, rt.opts.DefaultLimits, true)
	if err != nil {
		return nil, err
	}
	if rt.preload != "" {
		if err := b.runQuiet(ctx, rt.preload, prepTimeout); err != nil {
			b.kill()
			return nil, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "heavy: preloading %s into a new sandbox: %v", strings.Join(rt.opts.Preload, ", "), err).
				WithHint("check that image %s has these modules, or change the heavy runtime's preload", rt.img.Manifest.Name)
		}
	}
	b.startTime = time.Since(start)
	return b, nil
}
