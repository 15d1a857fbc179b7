package dlp

import "testing"

func TestJSONView(t *testing.T) {
	cases := []struct {
		name, raw, view string
	}{
		{"no escapes", `{"a":"b"}`, `{"a":"b"}`},
		{"simple escapes", `"a\nb\"c\\d\/e\tf"`, "\"a\nb\"c\\d/e\tf\""},
		{"unicode", `"\u0041KIA \u00e9"`, `"AKIA é"`},
		{"surrogate pair", `"\ud83d\ude00!"`, `"😀!"`},
		{"lone surrogate", `"\ud83d!"`, "\"\uFFFD!\""},
		{"invalid escape kept", `"\x41"`, `"\x41"`},
		{"short unicode kept", `"\u00"`, `"\u00"`},
		{"trailing backslash", `"a\`, `"a\`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			view, esc := jsonView([]byte(c.raw))
			if string(view) != c.view {
				t.Fatalf("view %q, want %q", view, c.view)
			}
			if viewToRaw(esc, len(view), true) != len(c.raw) || viewToRaw(esc, 0, false) != 0 {
				t.Errorf("ends map to %d, %d", viewToRaw(esc, 0, false), viewToRaw(esc, len(view), true))
			}
		})
	}
	// A span inside the view maps to the escapes that produced it.
	raw := `{"k":"x\u0041KIA5BQZ\n"}`
	view, esc := jsonView([]byte(raw))
	s, e := 7, 15 // "AKIA5BQZ" in the view
	if string(view[s:e]) != "AKIA5BQZ" {
		t.Fatalf("view %q", view)
	}
	if rs, re := viewToRaw(esc, s, false), viewToRaw(esc, e, true); raw[rs:re] != `\u0041KIA5BQZ` {
		t.Errorf("maps to %q", raw[rs:re])
	}
}
