package cli

import (
	"bytes"
	"testing"

	"github.com/agentbox-dev/agentbox/api"
)

// A streamed run shows its output as it comes, and says how much a slow terminal missed; every
// streaming command (run, sessions run, exec) prints through toTerminal.
func TestToTerminal(t *testing.T) {
	var stdout, stderr bytes.Buffer
	streamed := false
	on := toTerminal(&stdout, &stderr, &streamed, " (--json prints the whole result)")
	on(api.StreamEvent{Type: api.EventArtifact})
	on(api.StreamEvent{Type: api.EventNotice, Notice: &api.Notice{Kind: api.NoticeSessionMoved, FromNode: "a", ToNode: "b", Step: "st_2_ab", Reason: "node a is gone"}})
	if streamed {
		t.Fatal("streamed before any output")
	}
	on(api.StreamEvent{Type: api.EventStdout, Text: "out\n"})
	on(api.StreamEvent{Type: api.EventStderr, Text: "err\n"})
	on(api.StreamEvent{Type: api.EventDropped, Dropped: &api.StreamDropped{StdoutBytes: 10, StderrBytes: 2}})
	if !streamed || stdout.String() != "out\n" {
		t.Fatalf("streamed %v, stdout %q", streamed, stdout.String())
	}
	want := "agentbox: the session moved from node a to node b and resumed from step st_2_ab (node a is gone)\n" +
		"err\n\nagentbox: 10 bytes of stdout and 2 of stderr were not shown: this terminal read too slowly (--json prints the whole result)\n"
	if stderr.String() != want {
		t.Fatalf("stderr %q, want %q", stderr.String(), want)
	}
}
