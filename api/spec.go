package api

import _ "embed"

// OpenAPI is the HTTP contract, api/openapi.yaml (OpenAPI 3.0).
//
//go:embed openapi.yaml
var OpenAPI []byte
