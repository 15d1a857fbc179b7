package interp

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// mainResult is the value of a cell's last expression as the code interpreter sends it: text (a
// string's repr loses its quotes, as there), html, and for a pandas DataFrame its columns as
// lists under "data" (the code interpreter's e2b/data); another value's JSON representation
// (_repr_json_) under "json".
func mainResult(o sandbox.Output) map[string]any {
	r := map[string]any{"type": "result", "is_main_result": true}
	text := o.Text
	if len(text) >= 2 && (text[0] == '\'' && text[len(text)-1] == '\'' || text[0] == '"' && text[len(text)-1] == '"') {
		text = text[1 : len(text)-1]
	}
	r["text"] = text
	if o.HTML != "" {
		r["html"] = o.HTML
	}
	if len(o.JSON) > 0 {
		if cols, ok := tableColumns(o.JSON); ok {
			r["data"] = cols
		} else {
			var v any
			if json.Unmarshal(o.JSON, &v) == nil {
				if _, isObject := v.(map[string]any); isObject {
					r["json"] = json.RawMessage(o.JSON)
				}
			}
		}
	}
	return r
}

// tableColumns turns a DataFrame's to_json(orient="table") into to_dict(orient="list"): each
// column (the index left out) with its values in order, columns in the frame's order.
func tableColumns(raw json.RawMessage) (json.RawMessage, bool) {
	var t struct {
		Schema *struct {
			Fields []struct {
				Name string `json:"name"`
			} `json:"fields"`
			PrimaryKey    []string `json:"primaryKey"`
			PandasVersion string   `json:"pandas_version"`
		} `json:"schema"`
		Data []map[string]json.RawMessage `json:"data"`
	}
	if json.Unmarshal(raw, &t) != nil || t.Schema == nil || t.Schema.PandasVersion == "" {
		return nil, false
	}
	index := map[string]bool{}
	for _, k := range t.Schema.PrimaryKey {
		index[k] = true
	}
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for _, f := range t.Schema.Fields {
		if index[f.Name] {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		k, _ := json.Marshal(f.Name)
		b.Write(k)
		b.WriteString(":[")
		for i, row := range t.Data {
			if i > 0 {
				b.WriteByte(',')
			}
			v := row[f.Name]
			if len(v) == 0 {
				v = json.RawMessage("null")
			}
			b.Write(v)
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
	if !json.Valid(b.Bytes()) || strings.TrimSpace(b.String()) == "" {
		return nil, false
	}
	return b.Bytes(), true
}
