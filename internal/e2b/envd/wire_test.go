package envd

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"strings"
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

// A StreamInput request longer than its bound fails with resource_exhausted instead of ending
// as if the client had sent all of it (the input past the bound would be lost unsaid).
func TestStreamInputOverBound(t *testing.T) {
	t.Parallel()
	// Envelopes of exactly 1 MiB, so that the bound falls between two of them: the case a plain
	// io.LimitReader ends as a clean end of the stream.
	head := `{"start":{"process":{"pid":1}},"pad":"`
	msg := []byte(head + strings.Repeat("x", maxMessage-5-len(head)-2) + `"}`)
	var body bytes.Buffer
	for body.Len() <= maxStreamInput {
		var h [5]byte
		binary.BigEndian.PutUint32(h[1:], uint32(len(msg)))
		body.Write(h[:])
		body.Write(msg)
	}
	r := httptest.NewRequest(http.MethodPost, "/process.Process/StreamInput", &body)
	r.Header.Set("Content-Type", "application/connect+json")
	w := httptest.NewRecorder()
	New(Options{}).Serve(w, r, Target{})
	if !strings.Contains(w.Body.String(), "resource_exhausted") {
		t.Fatalf("answer %q, want a resource_exhausted end of stream", w.Body.String())
	}
}
