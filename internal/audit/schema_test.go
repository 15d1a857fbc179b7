package audit

import (
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/api"
)

// TestRecordMatchesAPI holds the log's record and the API's in step: every JSON field of a log
// line is a field of api.AuditRecord with the same name and Go shape, and the other way round.
// The kind-specific objects are the API's own types (aliases), so they cannot drift.
func TestRecordMatchesAPI(t *testing.T) {
	fields := func(v any) map[string]reflect.Type {
		out := map[string]reflect.Type{}
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			f := rt.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			ft := f.Type
			if ft.Kind() == reflect.String {
				ft = reflect.TypeFor[string]() // Kind is a string type of the log's own
			}
			out[name] = ft
		}
		return out
	}
	log, wire := fields(Record{}), fields(api.AuditRecord{})
	for name, lt := range log {
		wt, ok := wire[name]
		switch {
		case !ok:
			t.Errorf("the log writes %q, which api.AuditRecord does not have", name)
		case lt != wt:
			t.Errorf("field %q: the log writes %v, the API says %v", name, lt, wt)
		}
	}
	for name := range wire {
		if _, ok := log[name]; !ok {
			t.Errorf("api.AuditRecord has %q, which the log never writes", name)
		}
	}
}
