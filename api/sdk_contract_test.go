package api_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// pythonSDKWire prints what the Python SDK puts on the wire: the JSON member names of each of its
// wire types (agentbox.models.SCHEMAS) and the operations it calls (agentbox.client.ROUTES). It
// reads the dataclasses the SDK decodes and encodes with, not a list kept beside them.
const pythonSDKWire = `
import json
from agentbox import _codec, client, models
print(json.dumps({
    "schemas": {name: _codec.wire_fields(cls) for name, cls in models.SCHEMAS.items()},
    "routes": [list(r) for r in client.ROUTES.values()],
}))
`

// TestPythonSDKFollowsSpec keeps sdk/python in step with api/openapi.yaml, as TestSchemasMatchTypes
// does for the Go types (which the Go client uses): every schema has a wire type in the SDK with
// exactly its properties, and every route the SDK calls is in the spec with that method.
func TestPythonSDKFollowsSpec(t *testing.T) {
	py := testenv.RequireTool(t, "python3")
	sdk, err := filepath.Abs("../sdk/python")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", pythonSDKWire)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+sdk, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("python3: %v\n%s", err, stderr)
	}
	var got struct {
		Schemas map[string][]string `json:"schemas"`
		Routes  [][2]string         `json:"routes"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("SDK dump: %v\n%s", err, out)
	}

	var s struct {
		spec  `yaml:",inline"`
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(api.OpenAPI, &s); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	for name, sc := range s.Components.Schemas {
		fields, ok := got.Schemas[name]
		if !ok {
			t.Errorf("schema %s has no wire type in the Python SDK (agentbox.models.SCHEMAS)", name)
			continue
		}
		var props []string
		for p := range sc.Properties {
			props = append(props, p)
		}
		slices.Sort(props)
		slices.Sort(fields)
		if !slices.Equal(fields, props) {
			t.Errorf("%s: Python SDK fields %v, schema properties %v", name, fields, props)
		}
	}
	for name := range got.Schemas {
		if _, ok := s.Components.Schemas[name]; !ok {
			t.Errorf("Python SDK wire type %s has no schema in openapi.yaml", name)
		}
	}
	for _, r := range got.Routes {
		method, path := strings.ToLower(r[0]), r[1]
		if _, ok := s.Paths[path][method]; !ok {
			t.Errorf("the Python SDK calls %s %s, which openapi.yaml does not describe", r[0], path)
		}
	}
	if len(got.Routes) < 10 || len(got.Schemas) < 20 {
		t.Errorf("suspiciously little from the SDK: %d routes, %d schemas", len(got.Routes), len(got.Schemas))
	}
}
