package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/api"
)

// fakeSteps answers the time-travel calls from memory and records them.
type fakeSteps struct{ calls []string }

func (f *fakeSteps) Steps(_ context.Context, id string) (*api.StepList, error) {
	f.calls = append(f.calls, "steps "+id)
	return &api.StepList{Head: "st_3", Steps: []api.Step{
		{ID: "st_1", Code: "x = 1", Snapshot: api.StepSnapshot{State: "durable", Bytes: 4096}},
		{ID: "st_2", Parent: "st_1", Code: "x = 2\nprint(x)", Error: &api.PyError{Name: "ValueError"}, Snapshot: api.StepSnapshot{State: "dropped"}},
		{ID: "st_3", Parent: "st_1", Code: "x = 3", ErrorCode: "timeout", Snapshot: api.StepSnapshot{State: "kept"}},
	}}, nil
}

func (f *fakeSteps) session(op, id, step string) (*api.Session, error) {
	f.calls = append(f.calls, strings.TrimSpace(op+" "+id+" "+step))
	s := &api.Session{ID: id, State: "live", Head: step}
	switch op {
	case "fork":
		s.ID = "sb_fork"
	case "pause":
		s.State = "paused"
	}
	return s, nil
}

func (f *fakeSteps) Rewind(_ context.Context, id, step string) (*api.Session, error) {
	return f.session("rewind", id, step)
}
func (f *fakeSteps) Fork(_ context.Context, id, step string) (*api.Session, error) {
	return f.session("fork", id, step)
}
func (f *fakeSteps) Pause(_ context.Context, id string) (*api.Session, error) {
	return f.session("pause", id, "")
}
func (f *fakeSteps) Resume(_ context.Context, id string) (*api.Session, error) {
	return f.session("resume", id, "")
}
func (f *fakeSteps) InspectStep(_ context.Context, id, step string) (*api.StepInspection, error) {
	f.calls = append(f.calls, "inspect "+id+" "+step)
	return &api.StepInspection{Step: step, Variables: []api.Variable{{Name: "x", Type: "int", Size: 28, Repr: "3"},
		{Name: "df", Type: "pandas.core.frame.DataFrame", Size: 48 << 20, Shape: []int64{1000000, 6}, Head: "   a  b\n0  1  2"}},
		Files: []api.InspectedFile{{Path: "/home/user/a.csv", Size: 2048}}}, nil
}

// Interface guards.
var _ stepsClient = (*fakeSteps)(nil)

func TestStepsCommands(t *testing.T) {
	f := &fakeSteps{}
	var out bytes.Buffer
	o := StepsOptions{Session: "sb_1", Step: "st_1", Out: &out, Client: f}
	ctx := context.Background()
	if err := StepsList(ctx, o); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if !strings.HasPrefix(lines[3], "*  st_3") || !strings.Contains(lines[2], "ValueError") || !strings.Contains(lines[3], "timeout") ||
		!strings.Contains(lines[1], "durable 4.0 KiB") {
		t.Errorf("steps:\n%s", out.String())
	}
	for _, c := range []struct {
		run  func(context.Context, StepsOptions) error
		want string
	}{
		{StepsRewind, "session sb_1 is at step st_1\n"},
		{StepsFork, "sb_fork\n"},
		{StepsPause, "session sb_1 is paused\n"},
		{StepsResume, "session sb_1 is live\n"},
	} {
		out.Reset()
		if err := c.run(ctx, o); err != nil || out.String() != c.want {
			t.Errorf("got %q %v, want %q", out.String(), err, c.want)
		}
	}
	out.Reset()
	if err := StepsInspect(ctx, o); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "shape [1000000 6]") || !strings.Contains(s, "48.0 MiB") || !strings.Contains(s, "file /home/user/a.csv (2.0 KiB)") {
		t.Errorf("inspect:\n%s", s)
	}
	want := []string{"steps sb_1", "rewind sb_1 st_1", "fork sb_1 st_1", "pause sb_1", "resume sb_1", "inspect sb_1 st_1"}
	if strings.Join(f.calls, "|") != strings.Join(want, "|") {
		t.Errorf("calls %v, want %v", f.calls, want)
	}
	// Wrong arguments are a usage error, before any call.
	var errOut bytes.Buffer
	if code := stepsCmd(ctx, "rewind", []string{"sb_1"}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "want SESSION STEP") {
		t.Errorf("rewind with one argument: %d %q", code, errOut.String())
	}
}
