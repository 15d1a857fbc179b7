package router

import (
	"slices"
	"strings"

	sitter "github.com/tree-sitter/go-tree-sitter"
)

// Use is something the code does that nano's interpreter cannot, though it can import the module
// that offers it: nano's CPython is built for WASI, one thread and no processes or sockets, so
// starting a thread fails with "RuntimeError: can't start new thread", subprocess and socket
// with OSError, and os.system, os.fork and socket.gethostname are not there at all.
type Use struct {
	// Kind is UseThreads, UseProcesses or UseSockets.
	Kind string
	// What names the module or function as the code reaches it: "concurrent.futures",
	// "threading", "subprocess", "os.system", "asyncio.to_thread".
	What string
	// Line is 1-based: the import, or the first place the function is named.
	Line int
}

// The kinds of Use.
const (
	UseThreads   = "threads"
	UseProcesses = "subprocesses"
	UseSockets   = "sockets"
)

// attrUse is a rule for module.<name> uses.
type attrUse struct {
	module, kind string
	names        []string
	what         string // "": module.name
}

// What the router takes as a use of threads, processes or sockets. The rule is "the code names
// the thing that starts one", not "the code imports the module", where importing is harmless:
//
//   - threading: Thread or Timer named (threading.Lock, Event, local and current_thread work in
//     nano's one thread, and libraries import threading for its locks);
//   - _thread: start_new_thread or start_new named;
//   - concurrent.futures: ThreadPoolExecutor (threads) or ProcessPoolExecutor (processes) named
//     (Future and wait alone start nothing);
//   - asyncio: to_thread or run_in_executor (threads), create_subprocess_exec or
//     create_subprocess_shell (processes) named;
//   - os: os.system, os.popen, os.fork and the spawn and exec families, as os.<name> or imported
//     from os by name;
//   - asyncio's event loop: asyncio.run, new_event_loop, get_event_loop or Runner, as
//     asyncio.<name> or imported by name (the loop opens a socket pair to wake itself, which
//     nano refuses: asyncio.run fails there before the coroutine starts);
//   - subprocess, socket and socketserver: imported at all (next to nothing in them works
//     without a process or a socket).
//
// multiprocessing is not here: nano's build lacks the module, so its import already sends the
// code to heavy. A name is looked for only where the module is imported, and only in code (not
// in strings or comments). A name that is only mentioned (an isinstance check) sends the code to
// heavy needlessly: slower, never wrong. A use the router cannot see (getattr, a module that
// starts threads for the code) fails in nano with the interpreter's error, which the Manager
// recognises and retries in heavy.
var (
	namedUses = []struct {
		module string // the import that makes the names count; a prefix for packages
		kind   string
		names  []string
		what   string // "": module.name
	}{
		{"threading", UseThreads, []string{"Thread", "Timer"}, "threading"},
		{"_thread", UseThreads, []string{"start_new_thread", "start_new"}, "_thread"},
		{"concurrent", UseThreads, []string{"ThreadPoolExecutor"}, "concurrent.futures"},
		{"concurrent", UseProcesses, []string{"ProcessPoolExecutor"}, "concurrent.futures"},
		{"asyncio", UseThreads, []string{"to_thread", "run_in_executor"}, ""},
		{"asyncio", UseProcesses, []string{"create_subprocess_exec", "create_subprocess_shell"}, ""},
	}
	// attrUses count as module.<name> or `from module import name`: their names are too common
	// (run, system) to count alone.
	attrUses = []attrUse{
		{"os", UseProcesses, osProcessFuncs, ""},
		{"asyncio", UseSockets, []string{"run", "new_event_loop", "get_event_loop", "Runner"}, "asyncio event loop"},
	}
	importedUses = map[string]string{
		"subprocess":   UseProcesses,
		"socket":       UseSockets,
		"socketserver": UseSockets,
	}
	osProcessFuncs = []string{
		"system", "popen", "fork", "forkpty",
		"posix_spawn", "posix_spawnp",
		"spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe",
		"execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe",
	}
)

// uses fills the analysis's Uses from its imports (read first) and the tree.
func (w *walker) uses(root *sitter.Node) {
	findUses(w.a, func(name string) (int, bool) { return w.named(root, name) },
		func(module string, names []string) []attrAt { return w.attributes(root, module, names) })
}

// findUses fills a's Uses from its imports (read first) and two look-ups in the code: named, the
// line of the first identifier that is name; attributes, the places where module.<one of names>
// is an attribute.
func findUses(a *Analysis, named func(name string) (int, bool), attributes func(module string, names []string) []attrAt) {
	imported := map[string]int{} // top-level module → first line
	for _, imp := range a.Imports {
		top := imp.Top()
		if _, ok := imported[top]; top != "" && !ok {
			imported[top] = imp.Line
		}
		if kind, ok := importedUses[top]; ok {
			addUse(a, kind, top, imp.Line)
		}
		for _, u := range attrUses {
			if imp.Module != u.module {
				continue
			}
			for _, n := range imp.Names {
				if slices.Contains(u.names, n) {
					addUse(a, u.kind, u.whatOf(n), imp.Line)
				}
			}
		}
	}
	for _, u := range namedUses {
		if _, ok := imported[u.module]; !ok {
			continue
		}
		for _, name := range u.names {
			if line, ok := named(name); ok {
				what := u.what
				if what == "" {
					what = u.module + "." + name
				}
				addUse(a, u.kind, what, line)
			}
		}
	}
	for _, u := range attrUses {
		if _, ok := imported[u.module]; ok {
			for _, at := range attributes(u.module, u.names) {
				addUse(a, u.kind, u.whatOf(at.name), at.line)
			}
		}
	}
}

// addUse records one use, once per kind and name.
func addUse(a *Analysis, kind, what string, line int) {
	for _, u := range a.Uses {
		if u.Kind == kind && u.What == what {
			return
		}
	}
	a.Uses = append(a.Uses, Use{Kind: kind, What: what, Line: line})
}

// named returns the line of the first place name stands in the code as an identifier.
func (w *walker) named(root *sitter.Node, name string) (int, bool) {
	for _, off := range words(w.src, []byte(name)) {
		n := root.DescendantForByteRange(uint(off), uint(off+len(name)))
		if n != nil && n.Kind() == "identifier" {
			return line(n), true
		}
	}
	return 0, false
}

// whatOf names a use of an attribute rule: its what, or module.name.
func (u attrUse) whatOf(name string) string {
	if u.what != "" {
		return u.what
	}
	return u.module + "." + name
}

type attrAt struct {
	name string
	line int
}

// attributes finds module.<name> for the given names: the module's name as an identifier, then a
// dot and one of the names, the whole an attribute in the tree (not text in a string).
func (w *walker) attributes(root *sitter.Node, module string, names []string) []attrAt {
	var out []attrAt
	for _, at := range attrSpots(w.src, module, names) {
		n := root.DescendantForByteRange(uint(at.off), uint(at.off+len(module)))
		if n == nil || n.Kind() != "identifier" {
			continue
		}
		if p := n.Parent(); p == nil || p.Kind() != "attribute" {
			continue
		}
		out = append(out, attrAt{at.name, line(n)})
	}
	return out
}

// attrSpot is a place where the source reads module.<name>.
type attrSpot struct {
	off  int
	name string
}

// attrSpots finds module.<name> in the source, for the given names, wherever it is written
// (strings and comments too): the module's name as a whole word, a dot right after it and one of
// the names.
func attrSpots(src []byte, module string, names []string) []attrSpot {
	var out []attrSpot
	for _, off := range words(src, []byte(module)) {
		rest := src[off+len(module):]
		if len(rest) < 2 || rest[0] != '.' {
			continue
		}
		end := 1
		for end < len(rest) && isWordByte(rest[end]) {
			end++
		}
		name := string(rest[1:end])
		if !slices.Contains(names, name) {
			continue
		}
		out = append(out, attrSpot{off, name})
	}
	return out
}

// useReasons says, per kind, what the code uses that nano cannot do: "heavy: uses threads
// (concurrent.futures), which nano cannot start".
func useReasons(names Names, uses []Use) []string {
	var out []string
	for _, kind := range []string{UseThreads, UseProcesses, UseSockets} {
		var whats []string
		for _, u := range uses {
			if u.Kind == kind {
				whats = appendOnce(whats, u.What)
			}
		}
		if len(whats) == 0 {
			continue
		}
		verb := "start"
		if kind == UseSockets {
			verb = "open"
		}
		out = append(out, string(names.Images)+": uses "+kind+" ("+strings.Join(whats, ", ")+"), which "+string(names.Fixed)+" cannot "+verb)
	}
	return out
}
