package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/api"
)

// fakeSteps answers the time-travel calls from memory and records them. With contexts, its
// session's third step ran in code context "alpha".
type fakeSteps struct {
	calls    []string
	contexts bool
}

func (f *fakeSteps) Steps(_ context.Context, id string) (*api.StepList, error) {
	f.calls = append(f.calls, "steps "+id)
	l := &api.StepList{Head: "st_3", Steps: []api.Step{
		{ID: "st_1", Code: "x = 1", Snapshot: api.StepSnapshot{State: "durable", Bytes: 4096}},
		{ID: "st_2", Parent: "st_1", Code: "x = 2\nprint(x)", Error: &api.PyError{Name: "ValueError"}, Snapshot: api.StepSnapshot{State: "dropped"}},
		{ID: "st_3", Parent: "st_1", Code: "x = 3", ErrorCode: "timeout", Snapshot: api.StepSnapshot{State: "kept"}},
	}}
	if f.contexts {
		l.Steps[2].Context = "alpha"
	}
	return l, nil
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
func (f *fakeSteps) InspectStepIn(_ context.Context, id, step, codeContext string) (*api.StepInspection, error) {
	f.calls = append(f.calls, strings.TrimSpace("inspect "+id+" "+step+" "+codeContext))
	if codeContext != "" {
		return &api.StepInspection{Step: step, Context: codeContext, Variables: []api.Variable{{Name: "a", Type: "str", Size: 54, Repr: "'in " + codeContext + "'"}},
			Files: []api.InspectedFile{}}, nil
	}
	return &api.StepInspection{Step: step, Variables: []api.Variable{{Name: "x", Type: "int", Size: 28, Repr: "3"},
		{Name: "df", Type: "pandas.core.frame.DataFrame", Size: 48 << 20, Shape: []int64{1000000, 6}, Head: "   a  b\n0  1  2"}},
		Files: []api.InspectedFile{{Path: "/home/user/a.csv", Size: 2048}}}, nil
}
func (f *fakeSteps) DiffStepsIn(_ context.Context, id, step, base, codeContext string) (*api.StepDiff, error) {
	f.calls = append(f.calls, strings.TrimSpace("diff "+id+" "+step+" "+base+" "+codeContext))
	if base == "" {
		base = "st_0"
	}
	return &api.StepDiff{Base: base, Step: step, Added: []api.Variable{{Name: "y", Type: "int", Repr: "2"}},
		Changed: []api.Variable{{Name: "a", Type: "str", Repr: "'in " + codeContext + "'"}}, Removed: []api.Variable{{Name: "z", Type: "int"}},
		FilesAdded: []api.InspectedFile{{Path: "/home/user/b.txt", Size: 3}}}, nil
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
	if strings.Contains(out.String(), "CONTEXT") {
		t.Errorf("steps of a session without code contexts has a context column:\n%s", out.String())
	}
	// A session whose runs used code contexts: a column names each step's.
	out.Reset()
	if err := StepsList(ctx, StepsOptions{Session: "sb_1", Out: &out, Client: &fakeSteps{contexts: true}}); err != nil {
		t.Fatal(err)
	}
	cl := strings.Split(out.String(), "\n")
	if !regexp.MustCompile(`SNAPSHOT\s+CONTEXT\s+CODE$`).MatchString(cl[0]) || !regexp.MustCompile(`kept\s+alpha\s+x = 3$`).MatchString(cl[3]) ||
		!regexp.MustCompile(`durable 4.0 KiB\s+-\s+x = 1$`).MatchString(cl[1]) {
		t.Errorf("steps with contexts:\n%s", out.String())
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
	// In a code context: its variables, named; a diff in it, against a base.
	out.Reset()
	oc := o
	oc.Context = "alpha"
	if err := StepsInspect(ctx, oc); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.HasPrefix(s, "code context alpha\n") || !strings.Contains(s, "'in alpha'") || strings.Contains(s, "df") {
		t.Errorf("inspect --context alpha:\n%s", s)
	}
	out.Reset()
	oc.Base = "st_0"
	if err := StepsDiff(ctx, oc); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.HasPrefix(s, "from st_0 to st_1, code context alpha\n") || !strings.Contains(s, "+ y ") ||
		!strings.Contains(s, "~ a ") || !strings.Contains(s, "'in alpha'") || !strings.Contains(s, "- z ") || !strings.Contains(s, "+ file /home/user/b.txt") {
		t.Errorf("diff --context alpha --base st_0:\n%s", s)
	}
	want := []string{"steps sb_1", "rewind sb_1 st_1", "fork sb_1 st_1", "pause sb_1", "resume sb_1", "inspect sb_1 st_1",
		"inspect sb_1 st_1 alpha", "diff sb_1 st_1 st_0 alpha"}
	if strings.Join(f.calls, "|") != strings.Join(want, "|") {
		t.Errorf("calls %v, want %v", f.calls, want)
	}
	// Wrong arguments are a usage error, before any call.
	var errOut bytes.Buffer
	if code := stepsCmd(ctx, "rewind", []string{"sb_1"}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "want SESSION STEP") {
		t.Errorf("rewind with one argument: %d %q", code, errOut.String())
	}
}

// `agentbox inspect --context NAME` and `agentbox diff --context NAME --base STEP` ask the daemon
// for that context (the flags may follow the arguments); a context the step does not have is the
// daemon's not_found, printed with its hint, exit 1.
func TestStepsContextFlag(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.RequestURI())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch c := r.URL.Query().Get("context"); {
		case c == "nope":
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(api.ErrorResponse{Error: api.ErrorDetail{Code: api.CodeNotFound,
				Message: `step st_2 of session sb_1 has no code context "nope": no run up to it made one`, Hint: "contexts up to that step: alpha (and the main one)"}})
		case strings.HasSuffix(r.URL.Path, "/inspect"):
			_ = json.NewEncoder(w).Encode(api.StepInspection{Step: "st_2", Context: c, Variables: []api.Variable{{Name: "a", Type: "str", Repr: "'second'"}}, Files: []api.InspectedFile{}})
		default:
			_ = json.NewEncoder(w).Encode(api.StepDiff{Base: r.URL.Query().Get("base"), Step: "st_2", Changed: []api.Variable{{Name: "a", Type: "str", Repr: "'second'"}}})
		}
	}))
	defer srv.Close()
	t.Setenv("AGENTBOX_API_KEY", "k")
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), append(args, "--url", srv.URL), strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errs := run("inspect", "sb_1", "st_2", "--context", "alpha"); code != exitOK || !strings.HasPrefix(out, "code context alpha\n") || !strings.Contains(out, "'second'") {
		t.Errorf("inspect --context alpha: %d\n%s%s", code, out, errs)
	}
	if code, out, errs := run("diff", "--context", "alpha", "--base", "st_1", "sb_1", "st_2"); code != exitOK || !strings.Contains(out, "from st_1 to st_2, code context alpha") || !strings.Contains(out, "~ a ") {
		t.Errorf("diff --context alpha: %d\n%s%s", code, out, errs)
	}
	if code, _, errs := run("inspect", "sb_1", "st_2"); code != exitOK {
		t.Errorf("inspect without a context: %d %s", code, errs)
	}
	code, out, errs := run("inspect", "--context", "nope", "sb_1", "st_2")
	if code != exitFailure || out != "" || !strings.Contains(errs, `no code context "nope"`) || !strings.Contains(errs, "contexts up to that step: alpha") {
		t.Errorf("inspect --context nope: %d %q %q", code, out, errs)
	}
	if code, _, errs := run("rewind", "--context", "alpha", "sb_1", "st_2"); code != exitUsage || !strings.Contains(errs, "context") {
		t.Errorf("rewind --context: %d %q (only inspect and diff have the flag)", code, errs)
	}
	want := []string{"/v1/sessions/sb_1/steps/st_2/inspect?context=alpha", "/v1/sessions/sb_1/steps/st_2/diff?base=st_1&context=alpha",
		"/v1/sessions/sb_1/steps/st_2/inspect", "/v1/sessions/sb_1/steps/st_2/inspect?context=nope"}
	if !slices.Equal(asked, want) {
		t.Errorf("the daemon was asked\n%v\nwant\n%v", asked, want)
	}
}
