package apiwire

import (
	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// StepToAPI turns a session step into the wire one.
func StepToAPI(st sandbox.Step) api.Step {
	out := api.Step{
		ID: st.ID, Parent: st.Parent, Session: st.Session, Seq: st.Seq, Runtime: string(st.Tier), Code: st.Code, Context: st.Context,
		Stdout: st.Stdout, Stderr: st.Stderr, Truncated: st.Truncated, ExitCode: st.ExitCode,
		ErrorCode: string(st.ErrorKind), Artifacts: make([]api.Artifact, 0, len(st.Artifacts)),
		Started: st.Started, DurationMS: Millis(st.Took),
		AuditRecords: st.AuditRecords,
		Snapshot: api.StepSnapshot{State: string(st.Snapshot.State), Reason: st.Snapshot.Reason, Note: st.Snapshot.Note, Bytes: st.Snapshot.Bytes,
			TookMS: Millis(st.Snapshot.Took), DurableMS: Millis(st.Snapshot.Durable)},
	}
	if e := st.Error; e != nil {
		out.Error = &api.PyError{Name: e.Name, Value: e.Value, Traceback: e.Traceback}
	}
	for _, o := range st.Outputs {
		out.Outputs = append(out.Outputs, api.Output{Text: o.Text, HTML: o.HTML, JSON: o.JSON})
	}
	for _, a := range st.Artifacts {
		out.Artifacts = append(out.Artifacts, api.Artifact{ID: a.ID, Name: a.Name, MIME: a.MIME, Size: a.Size, SHA256: a.SHA256, Chart: a.Chart})
	}
	return out
}

// StepsToAPI lists a session's steps on the wire; none is an empty list.
func StepsToAPI(steps []sandbox.Step, head string) api.StepList {
	out := api.StepList{Head: head, Steps: make([]api.Step, 0, len(steps))}
	for _, st := range steps {
		out.Steps = append(out.Steps, StepToAPI(st))
	}
	return out
}

func variablesToAPI(vs []sandbox.Variable) []api.Variable {
	out := make([]api.Variable, 0, len(vs))
	for _, v := range vs {
		out = append(out, api.Variable{Name: v.Name, Type: v.Type, Size: v.Size, Repr: v.Repr, Shape: v.Shape, Dtypes: v.Dtypes, Head: v.Head})
	}
	return out
}

func filesToAPI(fs []sandbox.InspectedFile) []api.InspectedFile {
	out := make([]api.InspectedFile, 0, len(fs))
	for _, f := range fs {
		out = append(out, api.InspectedFile{Path: f.Path, Size: f.Size, SHA256: f.SHA256})
	}
	return out
}

// InspectionToAPI turns a step's inspection into the wire one.
func InspectionToAPI(in sandbox.Inspection) api.StepInspection {
	return api.StepInspection{Step: in.Step, Context: in.Context, Variables: variablesToAPI(in.Variables), Files: filesToAPI(in.Files),
		Truncated: in.Truncated, TookMS: Millis(in.Took)}
}

// DiffToAPI turns a diff of two steps into the wire one.
func DiffToAPI(d sandbox.StepDiff) api.StepDiff {
	return api.StepDiff{Base: d.From, Step: d.To, Added: variablesToAPI(d.Added), Removed: variablesToAPI(d.Removed),
		Changed: variablesToAPI(d.Changed), FilesAdded: filesToAPI(d.FilesAdded), FilesRemoved: filesToAPI(d.FilesRemoved),
		FilesChanged: filesToAPI(d.FilesChanged)}
}
