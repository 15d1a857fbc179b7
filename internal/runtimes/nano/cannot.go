package nano

import (
	"path"
	"slices"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// What nano cannot do, read from its results: the Manager asks (sandbox.Explainer) after an auto
// run, and runs the code again in a tier that gives what it needed.

// nanoRefusals are nano's own errors for what its interpreter cannot do, as CPython 3.11 built for
// WASI raises them, measured in nano (`agentbox run --runtime nano`) with threading.Thread.start,
// ThreadPoolExecutor.map, _thread.start_new_thread, subprocess.run, os.popen, os.system,
// os.fork, os.execv, socket.socket, socket.create_connection, socket.gethostname and
// asyncio.run. They are matched exactly, name and value (and for the socket's ENOTSUP, where it
// was raised), so that user code raising a look-alike of its own ("can't start new thread: pool
// is full") is not taken for nano's refusal.
var nanoRefusals = []struct {
	name, value string
	what        sandbox.Use
	// in, when set, is the file (and function) the traceback's last frame must be in: the value
	// alone is too general.
	in string
}{
	// threading.Thread.start, ThreadPoolExecutor, _thread.start_new_thread, asyncio.to_thread:
	// _thread's ThreadError is RuntimeError.
	{"RuntimeError", "can't start new thread", sandbox.UseThreads, ""},
	// subprocess.Popen and everything on it (run, check_output, os.popen): Lib/subprocess.py
	// refuses on wasi with ENOTSUP.
	{"OSError", "[Errno 58] wasi does not support processes.", sandbox.UseProcesses, ""},
	// socket.socket() and socketpair(), and so every asyncio event loop (its self-pipe is a
	// socket pair): WASI's socket() is ENOTSUP. Other calls fail with ENOTSUP in WASI too, so
	// the frame must be socket.socket's constructor.
	{"OSError", "[Errno 58] Not supported", sandbox.UseSockets, "socket.py:__init__"},
}

// nanoMissing are the module functions nano's build lacks that heavy's has: calling one raises
// AttributeError "module 'os' has no attribute 'system'". The os ones start processes; the
// socket ones need the network stack (name resolution, socket families WASI does not have).
var nanoMissing = map[string]struct {
	names []string
	what  sandbox.Use
}{
	"os": {[]string{"system", "fork", "forkpty", "posix_spawn", "posix_spawnp",
		"spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe",
		"execv", "execve", "execl", "execle", "execlp", "execlpe", "execvp", "execvpe"}, sandbox.UseProcesses},
	"socket": {socketFuncs, sandbox.UseSockets},
	// socket.getaddrinfo and create_connection reach _socket's functions.
	"_socket": {socketFuncs, sandbox.UseSockets},
}

var socketFuncs = []string{"getaddrinfo", "getnameinfo", "gethostname", "sethostname", "gethostbyname",
	"gethostbyname_ex", "gethostbyaddr", "getservbyname", "getservbyport", "getprotobyname",
	"if_nameindex", "if_nametoindex", "if_indextoname", "AF_UNIX", "AF_PACKET"}

// Cannot reads a nano result for what the code needed that nano cannot give (sandbox.Explainer):
// one of nano's refusals (a thread, a process, a socket), or a ModuleNotFoundError, whose module
// the Manager then looks for in another tier's images. A result with an API error (a limit) is
// never one: the code did not get as far as asking.
func (r *Runtime) Cannot(res *sandbox.Result, err error) (sandbox.Need, bool) {
	if err != nil || res == nil || res.Error == nil {
		return sandbox.Need{}, false
	}
	name, value := res.Error.Name, res.Error.Value
	after := name + ": " + value
	for _, r := range nanoRefusals {
		if name == r.name && value == r.value && (r.in == "" || lastFrame(res.Error.Traceback) == r.in) {
			return sandbox.Need{After: after, Use: r.what}, true
		}
	}
	// A name lookup: the driver's stand-in for the name functions nano's _socket lacks
	// (engine.NoNetwork), "[Errno 8] agentbox: this sandbox has no network ...", raised as it is
	// or wrapped by an HTTP client (urllib's URLError, requests' ConnectionError).
	if strings.Contains(value, "] "+engine.NoNetwork) {
		return sandbox.Need{After: "gaierror: no name lookup", Use: sandbox.UseSockets}, true
	}
	if name == "AttributeError" {
		// module 'os' has no attribute 'system'
		if rest, ok := strings.CutPrefix(value, "module '"); ok {
			mod, attr, _ := strings.Cut(rest, "' has no attribute '")
			if miss, ok := nanoMissing[mod]; ok && strings.HasSuffix(attr, "'") && slices.Contains(miss.names, strings.TrimSuffix(attr, "'")) {
				return sandbox.Need{After: after, Use: miss.what}, true
			}
		}
	}
	if name != "ModuleNotFoundError" {
		return sandbox.Need{}, false
	}
	mod, ok := missingModule(value)
	if !ok {
		return sandbox.Need{}, false
	}
	top, _, _ := strings.Cut(mod, ".")
	return sandbox.Need{After: after, Module: top}, true
}

// missingModule reads the module name out of a ModuleNotFoundError's value, "No module named 'x'".
func missingModule(value string) (string, bool) {
	rest, ok := strings.CutPrefix(value, "No module named '")
	if !ok {
		return "", false
	}
	name, _, ok := strings.Cut(rest, "'")
	return name, ok && name != ""
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
