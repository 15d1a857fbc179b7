package proto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	in := []Frame{
		{Op: OpHello, Version: Version, PythonVersion: "3.11.2"},
		{Op: OpRun, ID: 7, Run: &RunRequest{Code: "print(1)", Timeout: time.Second, StdoutBytes: 10}},
		{Op: OpOutput, ID: 7, Stream: Stdout, Data: []byte{0, 1, 0xff}},
	}
	for i := range in {
		if err := Write(&buf, &in[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range in {
		var f Frame
		if err := Read(&buf, &f, 0); err != nil {
			t.Fatal(err)
		}
		if f.Op != in[i].Op || f.ID != in[i].ID || !bytes.Equal(f.Data, in[i].Data) {
			t.Errorf("frame %d: got %+v, want %+v", i, f, in[i])
		}
	}
	var f Frame
	if err := Read(&buf, &f, 0); err != io.EOF {
		t.Errorf("at the end: %v, want io.EOF", err)
	}
}

func TestBrokenFrames(t *testing.T) {
	frame := func(n uint32, body string) *bytes.Buffer {
		var b bytes.Buffer
		binary.Write(&b, binary.BigEndian, n)
		b.WriteString(body)
		return &b
	}
	tests := []struct {
		name string
		in   *bytes.Buffer
		max  int
		want func(error) bool
	}{
		{"too large", frame(1<<30, ""), 0, func(err error) bool { return errors.Is(err, ErrFrameTooLarge) }},
		{"over the caller's max", frame(100, ""), 10, func(err error) bool { return errors.Is(err, ErrFrameTooLarge) }},
		{"cut short", frame(10, `{"op"`), 0, func(err error) bool { return err == io.ErrUnexpectedEOF }},
		{"half a header", bytes.NewBufferString("\x00\x00"), 0, func(err error) bool { return err == io.ErrUnexpectedEOF }},
		{"not json", frame(3, "abc"), 0, func(err error) bool { return err != nil }},
		{"no op", frame(2, "{}"), 0, func(err error) bool { return err != nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f Frame
			if err := Read(tt.in, &f, tt.max); !tt.want(err) {
				t.Errorf("got %v", err)
			}
		})
	}
}
