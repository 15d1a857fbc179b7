package mcpserver

import (
	"encoding/json"
	"reflect"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agentbox-dev/agentbox/api"
)

// apiPackage is the import path of the API's wire types, whose names are the contract's schemas.
var apiPackage = reflect.TypeFor[api.RunRequest]().PkgPath()

// inferOptions make the inferred schemas match what encoding/json writes: a []byte is a base64
// string, a json.RawMessage any JSON value.
var inferOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[[]byte]():          {Type: "string", ContentEncoding: "base64"},
	reflect.TypeFor[json.RawMessage](): {},
}}

// schemaFor infers the JSON schema of T from its Go type, as the SDK does, and describes its
// fields from the contract: a field of an API type by the contract's schema of that name, a field
// of this package's types by its jsonschema tag or else by the operation's parameter of its name
// (a `param` tag names another). Enums of the contract are copied into input schemas, so that a
// model sees the choices ("auto", "nano", "heavy").
func schemaFor[T any](c *contract, op *operation, input bool) (*jsonschema.Schema, error) {
	t := reflect.TypeFor[T]()
	s, err := jsonschema.ForType(t, inferOptions)
	if err != nil {
		return nil, err
	}
	var params map[string]string
	if op != nil {
		params = op.params
	}
	c.describe(s, t, params, input)
	return s, nil
}

func (c *contract) describe(s *jsonschema.Schema, t reflect.Type, params map[string]string, input bool) {
	for s != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s == nil {
		return
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		c.describe(s.Items, t.Elem(), nil, input)
		return
	case reflect.Map:
		c.describe(s.AdditionalProperties, t.Elem(), nil, input)
		return
	case reflect.Struct:
	default:
		return
	}
	var comp *oaSchema
	if t.PkgPath() == apiPackage {
		comp = c.schemas[t.Name()]
	}
	if s.Description == "" && comp != nil {
		s.Description = strings.TrimSpace(comp.Description)
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			c.describe(s, f.Type, params, input) // its fields are this object's
			continue
		}
		if name == "" {
			name = f.Name
		}
		ps := s.Properties[name]
		if ps == nil {
			continue
		}
		var prop *oaSchema
		if comp != nil {
			prop = comp.Properties[name]
		}
		if ps.Description == "" {
			switch {
			case prop != nil:
				ps.Description = strings.TrimSpace(prop.Description)
			case params != nil:
				p := f.Tag.Get("param")
				if p == "" {
					p = name
				}
				ps.Description = params[p]
			}
		}
		if input && prop != nil && len(prop.Enum) > 0 && ps.Enum == nil {
			ps.Enum = append([]any(nil), prop.Enum...)
		}
		c.describe(ps, f.Type, nil, input)
	}
}
