package mcpserver

import (
	"fmt"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/agentbox-dev/agentbox/api"
)

// The HTTP contract (api/openapi.yaml) says what every operation, field and parameter means. The
// tools read their descriptions from it, so that a tool says what its operation says and the
// words are written once.

type oaSchema struct {
	Description string               `yaml:"description"`
	Enum        []any                `yaml:"enum"`
	Properties  map[string]*oaSchema `yaml:"properties"`
}

type oaParam struct {
	Ref         string `yaml:"$ref"`
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

type oaOperation struct {
	OperationID string    `yaml:"operationId"`
	Summary     string    `yaml:"summary"`
	Description string    `yaml:"description"`
	Parameters  []oaParam `yaml:"parameters"`
}

type oaPathItem struct {
	Parameters []oaParam    `yaml:"parameters"`
	Get        *oaOperation `yaml:"get"`
	Put        *oaOperation `yaml:"put"`
	Post       *oaOperation `yaml:"post"`
	Delete     *oaOperation `yaml:"delete"`
}

// operation is one operation of the contract, its parameters resolved.
type operation struct {
	method, path         string
	summary, description string
	// params are the descriptions of its parameters (path and query), by name.
	params map[string]string
}

type contract struct {
	schemas map[string]*oaSchema
	ops     map[string]*operation
}

var theContract = sync.OnceValues(func() (*contract, error) { return parseContract(api.OpenAPI) })

func parseContract(b []byte) (*contract, error) {
	var doc struct {
		Paths      map[string]oaPathItem `yaml:"paths"`
		Components struct {
			Schemas    map[string]*oaSchema `yaml:"schemas"`
			Parameters map[string]oaParam   `yaml:"parameters"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("the HTTP contract: %w", err)
	}
	c := &contract{schemas: doc.Components.Schemas, ops: map[string]*operation{}}
	resolve := func(p oaParam) oaParam {
		if name, ok := strings.CutPrefix(p.Ref, "#/components/parameters/"); ok {
			return doc.Components.Parameters[name]
		}
		return p
	}
	for path, item := range doc.Paths {
		for method, op := range map[string]*oaOperation{"GET": item.Get, "PUT": item.Put, "POST": item.Post, "DELETE": item.Delete} {
			if op == nil || op.OperationID == "" {
				continue
			}
			o := &operation{method: method, path: path, summary: op.Summary, description: op.Description, params: map[string]string{}}
			for _, p := range append(append([]oaParam{}, item.Parameters...), op.Parameters...) {
				p = resolve(p)
				o.params[p.Name] = strings.TrimSpace(p.Description)
			}
			c.ops[op.OperationID] = o
		}
	}
	return c, nil
}

// operation returns the contract's operation by its operationId.
func (c *contract) operation(id string) (*operation, error) {
	op, ok := c.ops[id]
	if !ok {
		return nil, fmt.Errorf("the HTTP contract has no operation %q", id)
	}
	return op, nil
}
