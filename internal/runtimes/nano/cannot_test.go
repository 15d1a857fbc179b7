package nano

import (
	"errors"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Cannot tells nano's own refusals, measured in nano, from look-alikes the user's code raises, and
// reports a missing module by its top-level package. The Manager's tests (internal/sandbox) run
// the same rules end to end through a fake.
func TestCannot(t *testing.T) {
	socketTB := "Traceback (most recent call last):\n" +
		"  File \"/usr/local/lib/python311.zip/socket.py\", line 631, in socketpair\n" +
		"  File \"/usr/local/lib/python311.zip/socket.py\", line 232, in __init__\nOSError: [Errno 58] Not supported\n"
	userTB := "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\nOSError: [Errno 58] Not supported\n"
	tests := []struct {
		name, exc, value, tb string
		want                 sandbox.Need
		ok                   bool
	}{
		{"module", "ModuleNotFoundError", "No module named 'pandas.core'", "",
			sandbox.Need{After: "ModuleNotFoundError: No module named 'pandas.core'", Module: "pandas"}, true},
		{"thread", "RuntimeError", "can't start new thread", "",
			sandbox.Need{After: "RuntimeError: can't start new thread", Use: sandbox.UseThreads}, true},
		{"thread look-alike", "RuntimeError", "can't start new thread: the pool is full", "", sandbox.Need{}, false},
		{"subprocess", "OSError", "[Errno 58] wasi does not support processes.", "",
			sandbox.Need{After: "OSError: [Errno 58] wasi does not support processes.", Use: sandbox.UseProcesses}, true},
		{"os.system", "AttributeError", "module 'os' has no attribute 'system'", "",
			sandbox.Need{After: "AttributeError: module 'os' has no attribute 'system'", Use: sandbox.UseProcesses}, true},
		{"os attribute nano lacks for another reason", "AttributeError", "module 'os' has no attribute 'nope'", "", sandbox.Need{}, false},
		{"socket in socket.py", "OSError", "[Errno 58] Not supported", socketTB,
			sandbox.Need{After: "OSError: [Errno 58] Not supported", Use: sandbox.UseSockets}, true},
		{"ENOTSUP elsewhere", "OSError", "[Errno 58] Not supported", userTB, sandbox.Need{}, false},
		{"gethostname", "AttributeError", "module 'socket' has no attribute 'gethostname'", "",
			sandbox.Need{After: "AttributeError: module 'socket' has no attribute 'gethostname'", Use: sandbox.UseSockets}, true},
		{"name lookup", "gaierror", "[Errno 8] " + engine.NoNetwork, "",
			sandbox.Need{After: "gaierror: no name lookup", Use: sandbox.UseSockets}, true},
		{"name lookup in urllib", "URLError", "<urlopen error [Errno 8] " + engine.NoNetwork + ">", "",
			sandbox.Need{After: "gaierror: no name lookup", Use: sandbox.UseSockets}, true},
		{"the user's own gaierror", "gaierror", "[Errno 8] no such host", "", sandbox.Need{}, false},
		{"another exception", "ZeroDivisionError", "division by zero", "", sandbox.Need{}, false},
	}
	var r *Runtime // Cannot reads results only: no workers needed
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := &sandbox.Result{ExitCode: 1, Error: &sandbox.PyError{Name: tc.exc, Value: tc.value, Traceback: tc.tb}}
			got, ok := r.Cannot(res, nil)
			if ok != tc.ok || got != tc.want {
				t.Errorf("Cannot = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
			// A result that came with an API error (a limit) is never one.
			if _, ok := r.Cannot(res, errors.New("timeout")); ok {
				t.Error("a result with an error was read as a refusal")
			}
		})
	}
}
