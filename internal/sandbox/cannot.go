package sandbox

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// cannot is what a nano result shows nano could not do that heavy can: import a module an image
// has, start a thread, start a process, open a socket.
type cannot struct {
	// after names the error as the result shows it: "RuntimeError: can't start new thread".
	after string
	// what is what the code wanted, for hints: "threads", "subprocesses", "sockets", "pandas".
	what string
	// image is the image that has the missing module; empty for the other kinds.
	image string
}

// reason says why a nano result goes to heavy: "ModuleNotFoundError: No module named 'pandas'
// in nano", "RuntimeError: can't start new thread in nano (nano cannot start threads)".
func (c cannot) reason() string {
	switch c.what {
	case cannotThreads, cannotProcesses:
		return c.after + " in nano (nano cannot start " + c.what + ")"
	case cannotSockets:
		return c.after + " in nano (nano cannot open sockets)"
	}
	return c.after + " in nano"
}

const (
	cannotThreads   = "threads"
	cannotProcesses = "subprocesses"
	cannotSockets   = "sockets"
)

// nanoRefusals are nano's own errors for what its interpreter cannot do, as CPython 3.11 built for
// WASI raises them, measured in nano (`agentbox run --runtime nano`) with threading.Thread.start,
// ThreadPoolExecutor.map, _thread.start_new_thread, subprocess.run, os.popen, os.system,
// os.fork, os.execv, socket.socket, socket.create_connection, socket.gethostname and
// asyncio.run. They are matched exactly, name and value (and for the socket's ENOTSUP, where it
// was raised), so that user code raising a look-alike of its own ("can't start new thread: pool
// is full") is not taken for nano's refusal.
var nanoRefusals = []struct {
	name, value, what string
	// in, when set, is the file (and function) the traceback's last frame must be in: the value
	// alone is too general.
	in string
}{
	// threading.Thread.start, ThreadPoolExecutor, _thread.start_new_thread, asyncio.to_thread:
	// _thread's ThreadError is RuntimeError.
	{"RuntimeError", "can't start new thread", cannotThreads, ""},
	// subprocess.Popen and everything on it (run, check_output, os.popen): Lib/subprocess.py
	// refuses on wasi with ENOTSUP.
	{"OSError", "[Errno 58] wasi does not support processes.", cannotProcesses, ""},
	// socket.socket() and socketpair(), and so every asyncio event loop (its self-pipe is a
	// socket pair): WASI's socket() is ENOTSUP. Other calls fail with ENOTSUP in WASI too, so
	// the frame must be socket.socket's constructor.
	{"OSError", "[Errno 58] Not supported", cannotSockets, "socket.py:__init__"},
}

// nanoMissing are the module functions nano's build lacks that heavy's has: calling one raises
// AttributeError "module 'os' has no attribute 'system'". The os ones start processes; the
// socket ones need the network stack (name resolution, socket families WASI does not have).
var nanoMissing = map[string]struct {
	names []string
	what  string
}{
	"os": {[]string{"system", "fork", "forkpty", "posix_spawn", "posix_spawnp",
		"spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe",
		"execv", "execve", "execl", "execle", "execlp", "execlpe", "execvp", "execvpe"}, cannotProcesses},
	"socket": {socketFuncs, cannotSockets},
	// socket.getaddrinfo and create_connection reach _socket's functions.
	"_socket": {socketFuncs, cannotSockets},
}

var socketFuncs = []string{"getaddrinfo", "getnameinfo", "gethostname", "sethostname", "gethostbyname",
	"gethostbyname_ex", "gethostbyaddr", "getservbyname", "getservbyport", "getprotobyname",
	"if_nameindex", "if_nametoindex", "if_indextoname", "AF_UNIX", "AF_PACKET"}

// nanoCannot reads a nano result: whether its error is one of nano's refusals, or a
// ModuleNotFoundError for a module a heavy image has, on a daemon that runs heavy. A result with
// an API error (a limit) is never one: the code did not get as far as asking.
func (m *Manager) nanoCannot(res *Result, err error) (cannot, bool) {
	if _, ok := m.runtimes[TierHeavy]; !ok || err != nil || res == nil || res.Error == nil {
		return cannot{}, false
	}
	name, value := res.Error.Name, res.Error.Value
	after := name + ": " + value
	for _, r := range nanoRefusals {
		if name == r.name && value == r.value && (r.in == "" || lastFrame(res.Error.Traceback) == r.in) {
			return cannot{after: after, what: r.what}, true
		}
	}
	if name == "AttributeError" {
		// module 'os' has no attribute 'system'
		if rest, ok := strings.CutPrefix(value, "module '"); ok {
			mod, attr, _ := strings.Cut(rest, "' has no attribute '")
			if miss, ok := nanoMissing[mod]; ok && strings.HasSuffix(attr, "'") && slices.Contains(miss.names, strings.TrimSuffix(attr, "'")) {
				return cannot{after: after, what: miss.what}, true
			}
		}
	}
	if name != "ModuleNotFoundError" {
		return cannot{}, false
	}
	mod, ok := missingModule(value)
	if !ok {
		return cannot{}, false
	}
	top, _, _ := strings.Cut(mod, ".")
	if img := m.imageWith(top); img != "" {
		return cannot{after: after, what: top, image: img}, true
	}
	return cannot{}, false
}

// lastFrame returns where a traceback's last frame is, as "socket.py:__init__" (the file's base
// name and the function), from its last `  File "...", line N, in F` line.
func lastFrame(tb string) string {
	i := strings.LastIndex(tb, "  File \"")
	if i < 0 {
		return ""
	}
	line, _, _ := strings.Cut(tb[i+len("  File \""):], "\n")
	file, rest, ok := strings.Cut(line, "\", line ")
	if !ok {
		return ""
	}
	_, fn, ok := strings.Cut(rest, ", in ")
	if !ok {
		return ""
	}
	return path.Base(file) + ":" + fn
}

// imageWith returns the first heavy image that can import the top-level module, or "".
func (m *Manager) imageWith(top string) string {
	cat, ok := m.runtimes[TierHeavy].(Catalog)
	if !ok {
		return ""
	}
	for _, img := range cat.Images() {
		if slices.Contains(img.Modules, top) {
			return img.Name
		}
	}
	return ""
}

// hintNanoSession tells the user of a session created with runtime nano, whose run met what nano
// cannot do, where the code would run: in the result's reasons and at the end of its stderr,
// where an agent reading the traceback sees it. The session itself stays on nano: the user
// asked for it.
func hintNanoSession(res *Result, d *Decision, c cannot) {
	hint := fmt.Sprintf("this session was created with runtime nano; create it with runtime auto or heavy to use %s", c.what)
	d.Reasons = append(d.Reasons, "nano: "+hint)
	if res.Stderr != "" && !strings.HasSuffix(res.Stderr, "\n") {
		res.Stderr += "\n"
	}
	res.Stderr += "[agentbox] " + hint + "\n"
}
