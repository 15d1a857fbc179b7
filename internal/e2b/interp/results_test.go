package interp

import (
	"encoding/json"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// A DataFrame's table JSON becomes the code interpreter's data: its columns as lists, in order,
// the index left out; a string's repr loses its quotes.
func TestMainResult(t *testing.T) {
	t.Parallel()
	table := `{"schema":{"fields":[{"name":"index","type":"integer"},{"name":"y","type":"integer"},{"name":"x","type":"string"}],"primaryKey":["index"],"pandas_version":"1.4.0"},"data":[{"index":0,"y":4,"x":"a"},{"index":1,"y":5,"x":null}]}`
	r := mainResult(sandbox.Output{Text: "   y  x\n0  4  a", HTML: "<table>", JSON: json.RawMessage(table)})
	b, _ := json.Marshal(r["data"])
	if string(b) != `{"y":[4,5],"x":["a",null]}` || r["html"] != "<table>" || r["json"] != nil || r["is_main_result"] != true {
		t.Fatalf("got %s, %+v", b, r)
	}
	if r := mainResult(sandbox.Output{Text: "'hi'"}); r["text"] != "hi" {
		t.Fatalf("text %q", r["text"])
	}
	if r := mainResult(sandbox.Output{Text: "x", JSON: json.RawMessage(`{"a":1}`)}); r["json"] == nil || r["data"] != nil {
		t.Fatalf("a _repr_json_ value: %+v", r)
	}
}
