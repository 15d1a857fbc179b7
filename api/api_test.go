package api_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentbox-dev/agentbox/api"
)

type spec struct {
	Components struct {
		Schemas map[string]struct {
			Properties map[string]any `yaml:"properties"`
			Required   []string       `yaml:"required"`
		} `yaml:"schemas"`
	} `yaml:"components"`
}

// TestSchemasMatchTypes keeps api/openapi.yaml and the Go types in step: every JSON field of a
// type is a property of its schema and the other way round, and a schema's required fields exist.
func TestSchemasMatchTypes(t *testing.T) {
	var s spec
	if err := yaml.Unmarshal(api.OpenAPI, &s); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	types := map[string]any{
		"RunRequest":           api.RunRequest{},
		"InputFile":            api.InputFile{},
		"Deterministic":        api.Deterministic{},
		"Result":               api.Result{},
		"PyError":              api.PyError{},
		"Routing":              api.Routing{},
		"OutputFile":           api.OutputFile{},
		"Timings":              api.Timings{},
		"CreateSessionRequest": api.CreateSessionRequest{},
		"Session":              api.Session{},
		"Limits":               api.Limits{},
		"SessionList":          api.SessionList{},
		"Health":               api.Health{},
		"RuntimeHealth":        api.RuntimeHealth{},
		"ErrorResponse":        api.ErrorResponse{},
		"ErrorDetail":          api.ErrorDetail{},
		"Artifact":             api.Artifact{},
		"Output":               api.Output{},
		"StreamEvent":          api.StreamEvent{},
		"Notice":               api.Notice{},
		"StreamDropped":        api.StreamDropped{},
		"CommandRequest":       api.CommandRequest{},
		"Command":              api.Command{},
		"CommandList":          api.CommandList{},
		"FileInfo":             api.FileInfo{},
		"FileList":             api.FileList{},
		"Image":                api.Image{},
		"ImageList":            api.ImageList{},
		"AuditList":            api.AuditList{},
		"AuditRecord":          api.AuditRecord{},
		"AuditRun":             api.AuditRun{},
		"AuditLimits":          api.AuditLimits{},
		"AuditLifecycle":       api.AuditLifecycle{},
		"AuditEgress":          api.AuditEgress{},
		"AuditPolicy":          api.AuditPolicy{},
		"AuditAlert":           api.AuditAlert{},
		"AuditRepair":          api.AuditRepair{},
		"AuditRestart":         api.AuditRestart{},
		"AuditLostSession":     api.AuditLostSession{},
		"AuditMCP":             api.AuditMCP{},
		"MCPServer":            api.MCPServer{},
		"MCPServerList":        api.MCPServerList{},
		"MCPPin":               api.MCPPin{},
		"SetIntentRequest":     api.SetIntentRequest{},
		"Intent":               api.Intent{},
		"ReloadResult":         api.ReloadResult{},
		"Key":                  api.Key{},
		"KeyList":              api.KeyList{},
		"CreateKeyRequest":     api.CreateKeyRequest{},
		"CreatedKey":           api.CreatedKey{},
		"Step":                 api.Step{},
		"StepSnapshot":         api.StepSnapshot{},
		"StepList":             api.StepList{},
		"StepRequest":          api.StepRequest{},
		"Variable":             api.Variable{},
		"InspectedFile":        api.InspectedFile{},
		"StepInspection":       api.StepInspection{},
		"StepDiff":             api.StepDiff{},
		"Volume":               api.Volume{},
		"VolumeList":           api.VolumeList{},
		"CreateVolumeRequest":  api.CreateVolumeRequest{},
	}
	for name := range s.Components.Schemas {
		if _, ok := types[name]; !ok {
			t.Errorf("schema %s has no Go type in package api", name)
		}
	}
	for name, v := range types {
		sc, ok := s.Components.Schemas[name]
		if !ok {
			t.Errorf("type api.%s has no schema in openapi.yaml", name)
			continue
		}
		var fields []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			fields = append(fields, tag)
		}
		var props []string
		for p := range sc.Properties {
			props = append(props, p)
		}
		slices.Sort(fields)
		slices.Sort(props)
		if !slices.Equal(fields, props) {
			t.Errorf("%s: Go fields %v, schema properties %v", name, fields, props)
		}
		for _, r := range sc.Required {
			if !slices.Contains(fields, r) {
				t.Errorf("%s: required %q is not a field", name, r)
			}
		}
	}
}

func TestWireFormat(t *testing.T) {
	req := api.RunRequest{
		Code:          "print(1)",
		Files:         []api.InputFile{{Path: "a.txt", Content: []byte("hi")}},
		Deterministic: &api.Deterministic{Time: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), Seed: 7},
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"code":"print(1)","files":[{"path":"a.txt","content":"aGk="}],"deterministic":{"time":"2024-01-02T03:04:05Z","seed":7}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	// A result without an exception still carries "error": null, so clients can test it.
	b, _ = json.Marshal(api.Result{})
	if !strings.Contains(string(b), `"error":null`) {
		t.Errorf("result without exception: %s", b)
	}
}
