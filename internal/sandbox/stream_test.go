package sandbox

import (
	"strings"
	"testing"
)

type recSink struct{ got []string }

func (r *recSink) Write(s Stream, p []byte) { r.got = append(r.got, string(s)+":"+string(p)) }

func TestStreamer(t *testing.T) {
	t.Run("Caps", func(t *testing.T) {
		rec := &recSink{}
		st := newStreamer(rec, Limits{StdoutBytes: 5, StderrBytes: 100})
		st.Write(StreamStdout, []byte("abc"))
		st.Write(StreamStdout, []byte("defgh"))
		st.Write(StreamStdout, []byte("ijk"))
		st.Write(StreamStderr, []byte("e"))
		if got := strings.Join(rec.got, "|"); got != "stdout:abc|stdout:de|stderr:e" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("WholeCharacters", func(t *testing.T) {
		rec := &recSink{}
		st := newStreamer(rec, Limits{})
		b := []byte("aé€")
		st.Write(StreamStdout, b[:2]) // "a" and half of é
		st.Write(StreamStdout, b[2:4])
		st.Write(StreamStdout, b[4:])
		if got := strings.Join(rec.got, "|"); got != "stdout:a|stdout:é|stdout:€" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("RetryDoesNotRepeat", func(t *testing.T) {
		rec := &recSink{}
		st := newStreamer(rec, Limits{})
		st.Write(StreamStdout, []byte("one\ntwo\n"))
		st.retry(&Result{Stdout: "one\ntwo\n"})
		st.Write(StreamStdout, []byte("one\n"))
		st.Write(StreamStdout, []byte("two\nthree\n"))
		if got := strings.Join(rec.got, "|"); got != "stdout:one\ntwo\n|stdout:three\n" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("RetryDiverges", func(t *testing.T) {
		rec := &recSink{}
		st := newStreamer(rec, Limits{})
		st.Write(StreamStdout, []byte("t=1\n"))
		st.retry(&Result{Stdout: "t=1\n"})
		st.Write(StreamStdout, []byte("t=2\n"))
		if got := strings.Join(rec.got, "|"); got != "stdout:t=1\n|stdout:2\n" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("NoSink", func(t *testing.T) {
		if newStreamer(nil, Limits{}) != nil {
			t.Fatal("a run without a sink got a streamer")
		}
		var st *streamer
		st.retry(nil)
		st.flush()
	})
}
