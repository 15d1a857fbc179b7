package sandbox

import (
	"fmt"
	"strings"
)

// Code contexts. A session's interpreter can hold several contexts (RunRequest.Context): each has
// its own variables (a __main__ namespace of its own) and its own working directory, while the
// files, the processes, the installed packages, the network and the limits are the session's. They
// are what E2B's code interpreter calls contexts (internal/e2b/interp), and they cost no sandbox:
// a context is a namespace in the session's one interpreter process, made by the first run that
// names it. Every run in a context is a run of the session — governed, limited, audited and a step
// like any other — so a session's snapshots hold all its contexts, and a rewind or a fork takes
// them all back to that step (a context made after it starts empty again at its next run).
// Contexts share the interpreter's imported modules (sys.modules) and run one at a time, as the
// session's runs do. docs/RATIONALE.md says why this and not an interpreter process per context.

// MaxContexts bounds the contexts a session's interpreter holds besides its main one; the tier
// refuses a run that would make one more (KindConflict).
const MaxContexts = 32

// MaxContextName bounds a context's name.
const MaxContextName = 64

// checkContext checks the context fields of a request.
func checkContext(req *RunRequest) error {
	if req.Context == "" {
		switch {
		case req.ContextEnd:
			return Errorf(KindInvalidRequest, "context_end without a context: the session's main context ends with the session").
				WithHint("name the context to end in \"context\", or close the session")
		case req.ContextDir != "":
			return Errorf(KindInvalidRequest, "context_dir without a context: the session's main context starts in %s", WorkDir).
				WithHint("name the context in \"context\"")
		}
		return nil
	}
	if len(req.Context) > MaxContextName || strings.ContainsFunc(req.Context, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) {
		return Errorf(KindInvalidRequest, "context %q is not a context name", req.Context).
			WithHint("a context name is 1 to 64 letters, digits, '-', '_' or '.'")
	}
	if req.ContextDir != "" {
		if _, err := CleanPath(req.ContextDir); err != nil {
			return err
		}
	}
	return nil
}

// checkContextTier refuses a context in a session on a tier without them, naming the tiers
// with them.
func (m *Manager) checkContextTier(req *RunRequest, caps Capabilities) error {
	if (req.Context != "" || req.ContextReset) && !caps.Contexts {
		hint := "use a session per context"
		if with := m.tiersWith(func(c Capabilities) bool { return c.Contexts }); len(with) > 0 {
			hint = fmt.Sprintf("create the session with runtime %q, whose sessions have contexts, or %s", with[0], hint)
		}
		return Errorf(KindNotImplemented, "the %s tier has no code contexts: a session there has one interpreter context", caps.Tier).
			WithHint("%s", hint)
	}
	return nil
}
