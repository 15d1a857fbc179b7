package api_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/agentbox-dev/agentbox/api"
)

// jsSDKUncovered are the schemas of the spec the JavaScript SDK has no type for, on purpose: the
// admin surfaces (audit log, tenant keys, hosted MCP servers, egress reload) stay with the CLI,
// the Go client and the Python SDK. A new schema must be typed in sdk/js/index.d.ts or named
// here, so that adding one is a decision.
var jsSDKUncovered = []string{
	"AuditList", "AuditRecord", "AuditRun", "AuditLimits", "AuditLifecycle", "AuditEgress", "AuditPolicy",
	"AuditAlert", "AuditRepair", "AuditRestart", "AuditLostSession", "AuditMCP",
	"Key", "KeyList", "CreateKeyRequest", "CreatedKey",
	"MCPServer", "MCPServerList", "MCPPin", "ReloadResult",
}

var (
	// export interface Name { / export declare class Name {  (possibly with extends)
	dtsBlock = regexp.MustCompile(`(?m)^export (?:declare )?(?:interface|class) (\w+)[^{\n]*\{\s*$`)
	// A property: "  name: T;" or "  name?: T;" (methods have "(" before the colon; getters start with "get ").
	dtsProp = regexp.MustCompile(`^\s+(?:readonly\s+)?([A-Za-z_]\w*)\??:\s`)
	// ROUTES in sdk/js/src/client.js: "  run: ['POST', '/v1/run'],".
	jsRoute = regexp.MustCompile(`(?m)^\s+\w+: \['([A-Z]+)', '([^']+)'\],$`)
	// ERROR_CLASSES in sdk/js/src/errors.js: "  not_found: NotFound,".
	jsErrorClass = regexp.MustCompile(`(?m)^\s+([a-z_]+): ([A-Z]\w+),$`)
)

// dtsTypes reads the property names of each interface and class that index.d.ts exports. Its
// header asks for one member per line and no braces inside a type, which this relies on.
func dtsTypes(src string) map[string][]string {
	out := map[string][]string{}
	for _, m := range dtsBlock.FindAllStringSubmatchIndex(src, -1) {
		name := src[m[2]:m[3]]
		body := src[m[1]:]
		if end := strings.Index(body, "\n}"); end >= 0 {
			body = body[:end]
		}
		fields := []string{}
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "get ") {
				continue
			}
			if p := dtsProp.FindStringSubmatch(line); p != nil {
				fields = append(fields, p[1])
			}
		}
		out[name] = fields
	}
	return out
}

// TestJSSDKFollowsSpec keeps sdk/js in step with api/openapi.yaml: every schema is typed in
// index.d.ts with exactly its properties (or named in jsSDKUncovered), every route the SDK calls
// is in the spec with that method, and the SDK has one error class per error code.
func TestJSSDKFollowsSpec(t *testing.T) {
	dts, err := os.ReadFile("../sdk/js/index.d.ts")
	if err != nil {
		t.Fatal(err)
	}
	types := dtsTypes(string(dts))
	var s struct {
		spec  `yaml:",inline"`
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(api.OpenAPI, &s); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	for name, sc := range s.Components.Schemas {
		fields, ok := types[name]
		if !ok {
			if !slices.Contains(jsSDKUncovered, name) {
				t.Errorf("schema %s has no type in sdk/js/index.d.ts (type it there, or name it in jsSDKUncovered)", name)
			}
			continue
		}
		if slices.Contains(jsSDKUncovered, name) {
			t.Errorf("schema %s is typed in sdk/js/index.d.ts and named in jsSDKUncovered: drop it from the list", name)
		}
		var props []string
		for p := range sc.Properties {
			props = append(props, p)
		}
		slices.Sort(props)
		slices.Sort(fields)
		if !slices.Equal(fields, props) {
			t.Errorf("%s: sdk/js/index.d.ts properties %v, schema properties %v", name, fields, props)
		}
	}
	for _, name := range jsSDKUncovered {
		if _, ok := s.Components.Schemas[name]; !ok {
			t.Errorf("jsSDKUncovered names %s, which openapi.yaml no longer has", name)
		}
	}

	client, err := os.ReadFile("../sdk/js/src/client.js")
	if err != nil {
		t.Fatal(err)
	}
	routes := jsRoute.FindAllStringSubmatch(string(client), -1)
	if len(routes) < 10 {
		t.Fatalf("found only %d routes in sdk/js/src/client.js ROUTES", len(routes))
	}
	for _, r := range routes {
		if _, ok := s.Paths[r[2]][strings.ToLower(r[1])]; !ok {
			t.Errorf("the JS SDK calls %s %s, which openapi.yaml does not describe", r[1], r[2])
		}
	}

	errorsJS, err := os.ReadFile("../sdk/js/src/errors.js")
	if err != nil {
		t.Fatal(err)
	}
	src := string(errorsJS)
	if i := strings.Index(src, "ERROR_CLASSES"); i >= 0 {
		src = src[i:]
		src = src[:strings.Index(src, "});")]
	}
	classes := map[string]string{}
	for _, m := range jsErrorClass.FindAllStringSubmatch(src, -1) {
		classes[m[1]] = m[2]
	}
	codes := []string{api.CodeInvalidRequest, api.CodeUnauthorized, api.CodePolicyViolation, api.CodeForbidden,
		api.CodeNotFound, api.CodeTimeout, api.CodeConflict, api.CodeMemoryLimit, api.CodeOutputLimit,
		api.CodeInternal, api.CodeRuntimeUnavailable}
	for _, code := range codes {
		cls, ok := classes[code]
		if !ok {
			t.Errorf("the JS SDK has no error class for code %s (sdk/js/src/errors.js ERROR_CLASSES)", code)
			continue
		}
		if !strings.Contains(string(dts), "export declare class "+cls+" extends AgentboxError") {
			t.Errorf("index.d.ts does not declare the error class %s of code %s", cls, code)
		}
	}
	if len(classes) != len(codes) {
		t.Errorf("the JS SDK maps %d error codes, the API has %d: %v", len(classes), len(codes), classes)
	}
}
