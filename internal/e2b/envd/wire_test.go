package envd

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// A process runs for the SDK's timeoutMs, within the server's maximum; none (a long-running
// server) or more gets the maximum, never the short default of a run.
func TestProcessTimeout(t *testing.T) {
	t.Parallel()
	p := sandbox.Policy{Max: sandbox.Limits{Timeout: 10 * time.Minute}}
	for _, tt := range []struct {
		header string
		want   time.Duration
	}{
		{"", 10 * time.Minute},
		{"0", 10 * time.Minute},
		{"60000", time.Minute},
		{"86400000", 10 * time.Minute},
		{"junk", 10 * time.Minute},
	} {
		r := httptest.NewRequest(http.MethodPost, "/process.Process/Start", nil)
		if tt.header != "" {
			r.Header.Set("Connect-Timeout-Ms", tt.header)
		}
		if got := processTimeout(r, p); got != tt.want {
			t.Errorf("Connect-Timeout-Ms %q: %v, want %v", tt.header, got, tt.want)
		}
	}
}

// How a command ended reads as envd's end event: os/exec's words, -1 for a signal, and the error
// the SDK's CommandExitError shows for anything but exit 0.
func TestEndOf(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		c            sandbox.CommandInfo
		code         int32
		exited       bool
		status, errs string
	}{
		{sandbox.CommandInfo{Status: sandbox.CommandExited}, 0, true, "exit status 0", ""},
		{sandbox.CommandInfo{Status: sandbox.CommandExited, ExitCode: 3}, 3, true, "exit status 3", "exit status 3"},
		{sandbox.CommandInfo{Status: sandbox.CommandKilled, ExitCode: 137}, -1, false, "signal: killed", "signal: killed"},
		{sandbox.CommandInfo{Status: sandbox.CommandTimeout, ExitCode: -1}, -1, false, "signal: killed (agentbox: the command's timeout passed)", "signal: killed (agentbox: the command's timeout passed)"},
	} {
		e := endOf(tt.c)
		errs := ""
		if e.Error != nil {
			errs = *e.Error
		}
		if e.ExitCode != tt.code || e.Exited != tt.exited || e.Status != tt.status || errs != tt.errs {
			t.Errorf("%+v: got %+v (error %q)", tt.c, e, errs)
		}
	}
}

func TestPidOf(t *testing.T) {
	t.Parallel()
	if got := pidOf("cmd_0000000100000000"); got != 1 {
		t.Errorf("pidOf = %d, want 1", got)
	}
	if got := pidOf("cmd_ffffffff00000000"); got != 0x7fffffff {
		t.Errorf("pidOf = %d, want 2^31-1", got)
	}
	if got := pidOf("cmd_0000000000000000"); got == 0 {
		t.Error("pid 0")
	}
}

// Binary protobuf is refused with Connect's 415, not misread as JSON.
func TestBinaryCodecRefused(t *testing.T) {
	t.Parallel()
	h := New(Options{})
	r := httptest.NewRequest(http.MethodPost, "/filesystem.Filesystem/Stat", nil)
	r.Header.Set("Content-Type", "application/proto")
	w := httptest.NewRecorder()
	h.Serve(w, r, Target{})
	if w.Code != http.StatusUnsupportedMediaType {
		t.Fatalf("status %d", w.Code)
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"": "/home/user", "~": "/home/user", "~/a": "/home/user/a", "a/b": "/home/user/a/b", "/tmp/../tmp/x": "/tmp/x"} {
		if got := resolve(in); got != want {
			t.Errorf("resolve(%q) = %q, want %q", in, got, want)
		}
	}
}
