package wire

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	in := Response{Op: OpResult, ID: 7, Warm: 2, Retire: true,
		Result: &sandbox.Result{Stdout: "hi\n", ExitCode: 3},
		Error:  &Error{Kind: sandbox.KindTimeout, Message: "late"}}
	if err := Write(&buf, &in); err != nil {
		t.Fatal(err)
	}
	var out Response
	if err := Read(&buf, &out); err != nil {
		t.Fatal(err)
	}
	if out.Op != in.Op || out.ID != 7 || out.Warm != 2 || !out.Retire || out.Result.Stdout != "hi\n" || out.Error.Kind != sandbox.KindTimeout {
		t.Errorf("got %+v", out)
	}
	// Retire is left out unless set, so older readers see the same frames as before.
	buf.Reset()
	if err := Write(&buf, &Response{Op: OpStatus, Warm: 1}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "retire") {
		t.Errorf("frame %q mentions retire", buf.String()[4:])
	}
}
