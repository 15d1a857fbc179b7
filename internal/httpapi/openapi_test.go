package httpapi_test

import (
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/agentbox-dev/agentbox/api"
)

// TestRoutesMatchOpenAPI checks that every route the server serves is in api/openapi.yaml and
// every operation there is served.
func TestRoutesMatchOpenAPI(t *testing.T) {
	var spec struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(api.OpenAPI, &spec); err != nil {
		t.Fatal(err)
	}
	methods := []string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}
	var documented []string
	for path, item := range spec.Paths {
		for key := range item {
			if slices.Contains(methods, key) {
				documented = append(documented, strings.ToUpper(key)+" "+path)
			}
		}
	}
	slices.Sort(documented)
	served := newEnv(t).srv.Routes()
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("served but not in openapi.yaml: %s", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("in openapi.yaml but not served: %s", r)
		}
	}
	if len(served) < 8 {
		t.Errorf("only %d routes served: %v", len(served), served)
	}
}
