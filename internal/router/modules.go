package router

import "strings"

// NanoModules is what the nano build can import. It is measured, not written by hand: `agentbox
// setup` imports every candidate module in the nano interpreter and records the outcome
// (nano.ProbeModules, DATA/nano/modules.json).
type NanoModules struct {
	// Version is the build's sys.version_info (major, minor, micro).
	Version [3]int
	// Available are the modules that imported: top-level names and the submodules of packages.
	Available []string
	// Unavailable maps the modules that did not import to the error they raised.
	Unavailable map[string]string
}

// nanoSet answers "can nano import this" in constant time.
type nanoSet struct {
	ok  map[string]bool
	bad map[string]string
}

func newNanoSet(m NanoModules) nanoSet {
	s := nanoSet{ok: make(map[string]bool, len(m.Available)), bad: m.Unavailable}
	for _, n := range m.Available {
		s.ok[n] = true
	}
	if s.bad == nil {
		s.bad = map[string]string{}
	}
	return s
}

// has reports whether nano can import the dotted name: its top-level package imports and no
// part of it is known not to (a submodule can need what the build lacks: encodings.bz2_codec).
// Submodules the probe did not list (os.path, names inside packages) count as there.
func (s nanoSet) has(name string) bool {
	for i := 0; i <= len(name); i++ {
		if i == len(name) || name[i] == '.' {
			if _, bad := s.bad[name[:i]]; bad {
				return false
			}
		}
	}
	top, _, _ := strings.Cut(name, ".")
	return s.ok[top]
}

// known reports whether the probe listed the dotted name at all, as importable or not.
func (s nanoSet) known(name string) bool {
	_, bad := s.bad[name]
	return bad || s.ok[name]
}
