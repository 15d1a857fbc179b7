package sandbox

import (
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Inspecting a step: the Manager forks the step into a throwaway sandbox (the tier's Fork, never
// the live session), runs a bounded introspection script there, and closes it. The same script
// serves every tier with Python: variables (name, type, size, a bounded repr; DataFrames as shape,
// dtypes and head), files (path, size, hash). Bounded whatever the step holds: at most
// inspectMaxVars variables and inspectMaxFiles files, a repr of at most inspectMaxRepr characters,
// InspectTimeout of time and inspectMaxBytes of output.

//go:embed inspect.py
var inspectTemplate string

const (
	inspectMaxVars  = 200
	inspectMaxFiles = 500
	inspectMaxRepr  = 300
	inspectMaxBytes = 1 << 20
	// InspectTimeout bounds an inspection's run.
	InspectTimeout = 15 * time.Second
)

var inspectScript = strings.NewReplacer("@MAXVARS@", strconv.Itoa(inspectMaxVars), "@MAXFILES@", strconv.Itoa(inspectMaxFiles),
	"@MAXREPR@", strconv.Itoa(inspectMaxRepr), "@WORKDIR@", WorkDir).Replace(inspectTemplate)

// Variable is one global of a step's interpreter.
type Variable struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Size int64  `json:"size"`
	// Repr is a bounded repr(); empty for a DataFrame, which has Shape, Dtypes and Head.
	Repr   string            `json:"repr,omitempty"`
	Shape  []int64           `json:"shape,omitempty"`
	Dtypes map[string]string `json:"dtypes,omitempty"`
	Head   string            `json:"head,omitempty"`
}

// InspectedFile is one file of a step's work directory.
type InspectedFile struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	// SHA256 is the content's hash, for files up to 4 MiB.
	SHA256 string `json:"sha256,omitempty"`
}

// Inspection is what a step held.
type Inspection struct {
	Step string `json:"step"`
	// Context is the code context whose variables these are (RunRequest.Context); "" the main
	// one. Files are the session's, whatever the context.
	Context   string          `json:"context,omitempty"`
	Variables []Variable      `json:"variables"`
	Files     []InspectedFile `json:"files"`
	// Truncated says some variables or files were left out (the bounds above).
	Truncated bool          `json:"truncated"`
	Took      time.Duration `json:"took"`
}

// InspectStep describes the variables and files of a session's step.
func (m *Manager) InspectStep(ctx context.Context, id, step string) (Inspection, error) {
	return m.InspectStepIn(ctx, id, step, "")
}

// InspectStepIn describes the variables of one code context of a session's step (codeContext,
// RunRequest.Context; "" the main one) and the session's files. A context no run up to the step
// named (it did not exist then) is not found.
func (m *Manager) InspectStepIn(ctx context.Context, id, step, codeContext string) (Inspection, error) {
	start := time.Now()
	res, err := m.inStepForkIn(ctx, id, step, codeContext, inspectScript, inspectMaxBytes)
	if err != nil {
		return Inspection{}, err
	}
	switch {
	case res.Error != nil:
		return Inspection{}, Errorf(KindInternal, "inspecting step %s failed: %s: %s", step, res.Error.Name, res.Error.Value)
	case res.StdoutTruncated:
		return Inspection{}, Errorf(KindInternal, "inspecting step %s gave more than %d bytes", step, inspectMaxBytes)
	}
	var out Inspection
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		return Inspection{}, Errorf(KindInternal, "inspecting step %s gave no description: %v", step, err)
	}
	out.Step, out.Context, out.Took = step, codeContext, time.Since(start)
	if out.Variables == nil {
		out.Variables = []Variable{}
	}
	if out.Files == nil {
		out.Files = []InspectedFile{}
	}
	return out, nil
}

// StepFileMax bounds a file read from a step (ReadStepFile).
const StepFileMax = 8 << 20

// ReadStepFile returns a file as a session's step held it, read in a throwaway fork of the step.
func (m *Manager) ReadStepFile(ctx context.Context, id, step, path string) ([]byte, error) {
	p, err := CleanPath(path)
	if err != nil {
		return nil, err
	}
	code := fmt.Sprintf(`import base64, os, sys
p = %q
if not os.path.isfile(p):
    sys.stdout.write("missing")
elif os.path.getsize(p) > %d:
    sys.stdout.write("toobig %%d" %% os.path.getsize(p))
else:
    with open(p, "rb") as f:
        sys.stdout.write("file " + base64.b64encode(f.read()).decode())
`, p, StepFileMax)
	res, err := m.inStepFork(ctx, id, step, code, StepFileMax/3*4+1<<10)
	if err != nil {
		return nil, err
	}
	out := res.Stdout
	switch {
	case res.Error != nil:
		return nil, Errorf(KindInternal, "reading %s at step %s failed: %s: %s", p, step, res.Error.Name, res.Error.Value)
	case out == "missing":
		return nil, Errorf(KindNotFound, "step %s has no file %s", step, p).
			WithHint("GET /v1/sessions/%s/steps/%s/inspect lists its files", id, step)
	case strings.HasPrefix(out, "toobig "):
		return nil, Errorf(KindInvalidRequest, "%s is %s bytes at step %s, over the %d MiB a step's file is read at", p, strings.TrimPrefix(out, "toobig "), step, StepFileMax>>20).
			WithHint("rewind or fork the session to that step and read the file there")
	case !strings.HasPrefix(out, "file "):
		return nil, Errorf(KindInternal, "reading %s at step %s gave no content", p, step)
	}
	return base64.StdEncoding.DecodeString(strings.TrimPrefix(out, "file "))
}

// inStepFork runs code in a throwaway fork of a session's step, bounded by InspectTimeout and
// maxOut bytes of stdout, and closes the fork. The live session is not touched.
func (m *Manager) inStepFork(ctx context.Context, id, step, code string, maxOut int64) (*Result, error) {
	return m.inStepForkIn(ctx, id, step, "", code, maxOut)
}

// inStepForkIn is inStepFork with the code run in one of the step's code contexts ("" the main
// one).
func (m *Manager) inStepForkIn(ctx context.Context, id, step, codeContext, code string, maxOut int64) (*Result, error) {
	if err := checkContext(&RunRequest{Context: codeContext}); err != nil {
		return nil, err
	}
	// The fork is taken under the run lock (the tier's Fork reads the step's snapshot, which may
	// sit in the live sandbox); the code runs after it is released.
	s, unlock, err := m.lockSession(ctx, id)
	if err != nil {
		return nil, err
	}
	sn, err := m.snapshotter(s, "be inspected")
	if err != nil {
		unlock()
		return nil, err
	}
	m.mu.Lock()
	st, err := m.usableStep(s, step)
	var ref string
	if st != nil {
		ref = st.Snapshot.Ref
	}
	if err == nil && codeContext != "" {
		err = m.stepHasContext(s, st, codeContext)
	}
	opts := s.opts
	m.mu.Unlock()
	if err != nil {
		unlock()
		return nil, err
	}
	opts.ID = id + "-inspect"
	release, err := m.attachVolumes(s.info.Tenant, &opts)
	if err != nil {
		unlock()
		return nil, err
	}
	defer release()
	fork, err := sn.Fork(ctx, step, ref, opts)
	unlock()
	if err != nil {
		return nil, err
	}
	defer fork.Close()
	limits := opts.Limits
	limits.Timeout = InspectTimeout
	limits.StdoutBytes = maxOut
	res, err := fork.Run(ctx, &RunRequest{Code: code, Tier: opts.Tier, Limits: limits, ID: "run_" + newID()[3:], Context: codeContext})
	if err != nil {
		return nil, fmt.Errorf("step %s: %w", step, err)
	}
	return res, nil
}

// stepHasContext says whether code context c existed at step st of s: a run of st or of a step
// it came from named it (a context is made by the first run that names it). Called with m.mu.
func (m *Manager) stepHasContext(s *session, st *Step, c string) error {
	if t, ok := m.tier(st.Tier); ok {
		if err := m.checkContextTier(&RunRequest{Context: c}, t.caps); err != nil {
			return err
		}
	}
	seen := StepContexts(s.tl.step, st.ID)
	if slices.Contains(seen, c) {
		return nil
	}
	hint := "no run up to that step named a context: inspect the main one (no context)"
	if len(seen) > 0 {
		hint = "contexts up to that step: " + strings.Join(seen, ", ") + " (and the main one)"
	}
	return Errorf(KindNotFound, "step %s of session %s has no code context %q: no run up to it made one", st.ID, s.info.ID, c).
		WithHint("%s", hint)
}

// StepContexts returns the code contexts step id of a session has besides its main one, sorted:
// those its run and the runs of the steps it came from named (a context is made by the first run
// that names it). step looks a step of the session up by id (nil: none). The console lists them
// by the same rule the core checks a context against.
func StepContexts(step func(id string) *Step, id string) []string {
	var out []string
	for st := step(id); st != nil; st = step(st.Parent) {
		if st.Context != "" && !slices.Contains(out, st.Context) {
			out = append(out, st.Context)
		}
		if st.Parent == "" {
			break
		}
	}
	slices.Sort(out)
	return out
}

// StepDiff is what changed between two steps.
type StepDiff struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Variables added, removed and changed (type, size or repr differ); each as it is in To
	// (Removed: as it was in From).
	Added   []Variable `json:"added"`
	Removed []Variable `json:"removed"`
	Changed []Variable `json:"changed"`
	// Files added, removed and changed (size or hash differ).
	FilesAdded   []InspectedFile `json:"files_added"`
	FilesRemoved []InspectedFile `json:"files_removed"`
	FilesChanged []InspectedFile `json:"files_changed"`
}

// DiffSteps compares the variables and files of two steps of a session.
func (m *Manager) DiffSteps(ctx context.Context, id, from, to string) (StepDiff, error) {
	return m.DiffStepsIn(ctx, id, from, to, "")
}

// DiffStepsIn compares the variables of one code context ("" the main one) and the files of two
// steps of a session; from "" is to's parent (every front door's default), an invalid request
// for a session's first step.
func (m *Manager) DiffStepsIn(ctx context.Context, id, from, to, codeContext string) (StepDiff, error) {
	if from == "" {
		st, err := m.Step(id, to)
		if err != nil {
			return StepDiff{}, err
		}
		if st.Parent == "" {
			return StepDiff{}, Errorf(KindInvalidRequest, "step %s is the session's first; it has no parent to compare with", to).
				WithHint("name the step to compare with as the base")
		}
		from = st.Parent
	}
	a, err := m.InspectStepIn(ctx, id, from, codeContext)
	if err != nil {
		return StepDiff{}, err
	}
	b, err := m.InspectStepIn(ctx, id, to, codeContext)
	if err != nil {
		return StepDiff{}, err
	}
	d := StepDiff{From: from, To: to, Added: []Variable{}, Removed: []Variable{}, Changed: []Variable{},
		FilesAdded: []InspectedFile{}, FilesRemoved: []InspectedFile{}, FilesChanged: []InspectedFile{}}
	av := map[string]Variable{}
	for _, v := range a.Variables {
		av[v.Name] = v
	}
	for _, v := range b.Variables {
		old, ok := av[v.Name]
		switch {
		case !ok:
			d.Added = append(d.Added, v)
		case old.Type != v.Type || old.Size != v.Size || old.Repr != v.Repr || old.Head != v.Head || fmt.Sprint(old.Shape) != fmt.Sprint(v.Shape):
			d.Changed = append(d.Changed, v)
		}
		delete(av, v.Name)
	}
	for _, v := range a.Variables {
		if _, gone := av[v.Name]; gone {
			d.Removed = append(d.Removed, v)
		}
	}
	af := map[string]InspectedFile{}
	for _, f := range a.Files {
		af[f.Path] = f
	}
	for _, f := range b.Files {
		old, ok := af[f.Path]
		switch {
		case !ok:
			d.FilesAdded = append(d.FilesAdded, f)
		case old.Size != f.Size || old.SHA256 != f.SHA256:
			d.FilesChanged = append(d.FilesChanged, f)
		}
		delete(af, f.Path)
	}
	for _, f := range a.Files {
		if _, gone := af[f.Path]; gone {
			d.FilesRemoved = append(d.FilesRemoved, f)
		}
	}
	return d, nil
}
