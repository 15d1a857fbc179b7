package wire

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"

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

// TestSnapshotBytesRaw: snapshots travel as raw bytes after the JSON, both ways, and frames
// before and after them read as usual; the caller's message is not changed by Write.
func TestSnapshotBytesRaw(t *testing.T) {
	var buf bytes.Buffer
	snap := bytes.Repeat([]byte{0, 1, 2, 255}, 100000)
	resp := Response{Op: OpResult, ID: 1, Snapshot: snap}
	req := Request{Op: OpRestore, ID: 2, Step: "s", Restore: snap[:5]}
	for _, v := range []any{&Response{Op: OpResult, ID: 0}, &resp, &req, &Response{Op: OpResult, ID: 3}} {
		if err := Write(&buf, v); err != nil {
			t.Fatal(err)
		}
	}
	if len(resp.Snapshot) != len(snap) || len(req.Restore) != 5 {
		t.Fatal("Write changed the message")
	}
	if n := buf.Len(); n > len(snap)+len(snap[:5])+400 {
		t.Errorf("%d bytes on the wire for %d of snapshots: not raw", n, len(snap)+5)
	}
	var r0, r1, r3 Response
	var q Request
	for _, v := range []any{&r0, &r1, &q, &r3} {
		if err := Read(&buf, v); err != nil {
			t.Fatal(err)
		}
	}
	if r0.ID != 0 || r0.Snapshot != nil || r1.ID != 1 || !bytes.Equal(r1.Snapshot, snap) ||
		q.Step != "s" || !bytes.Equal(q.Restore, snap[:5]) || r3.ID != 3 || r3.Snapshot != nil {
		t.Errorf("read back %+v %d %+v %+v", r0, len(r1.Snapshot), q.Step, r3)
	}
	// A frame cut inside its snapshot is an error, not a clean end.
	buf.Reset()
	Write(&buf, &resp)
	cut := bytes.NewReader(buf.Bytes()[:buf.Len()-10])
	if err := Read(cut, &r1); err == nil || !strings.Contains(err.Error(), "short frame") {
		t.Errorf("cut frame: %v", err)
	}
}

// WriteParts writes the frame Write would for the parts joined, to a pipe (vectored, more parts
// than one writev takes, more bytes than the pipe holds) and to any other writer, and Read reads
// it back.
func TestWritePartsIsWrite(t *testing.T) {
	var parts [][]byte
	var joined []byte
	for i := range 3000 {
		p := bytes.Repeat([]byte{byte(i)}, 100+i%7)
		parts = append(parts, p)
		joined = append(joined, p...)
	}
	r := &Response{Op: OpStepSnapshot, ID: 7, Took: time.Millisecond}
	var want bytes.Buffer
	if err := Write(&want, &Response{Op: OpStepSnapshot, ID: 7, Took: time.Millisecond, Snapshot: joined}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteParts(&buf, r, parts); err != nil || !bytes.Equal(buf.Bytes(), want.Bytes()) {
		t.Fatalf("to a buffer: %v, same bytes %v", err, bytes.Equal(buf.Bytes(), want.Bytes()))
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	go func() {
		defer pw.Close()
		if err := WriteParts(pw, r, parts); err != nil {
			t.Error(err)
		}
	}()
	got, err := io.ReadAll(pr)
	if err != nil || !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("through a pipe: %v, %d bytes, same %v", err, len(got), bytes.Equal(got, want.Bytes()))
	}
	var back Response
	if err := Read(bytes.NewReader(got), &back); err != nil || back.ID != 7 || !bytes.Equal(back.Snapshot, joined) {
		t.Fatalf("read back: %v %+v", err, back.ID)
	}
}
