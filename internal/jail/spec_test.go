package jail

import (
	"errors"
	"strings"
	"testing"
)

func TestSpecValidate(t *testing.T) {
	good := func() Spec {
		return Spec{UID: 60001, GID: 60001, Binds: []Bind{{Source: "/srv/a.wasm", Target: "/a.wasm"}}}
	}
	tests := []struct {
		name   string
		change func(*Spec)
		ok     bool
	}{
		{"good", func(*Spec) {}, true},
		{"root uid", func(s *Spec) { s.UID = 0 }, false},
		{"root gid", func(s *Spec) { s.GID = 0 }, false},
		{"negative uid", func(s *Spec) { s.UID = -1 }, false},
		{"relative source", func(s *Spec) { s.Binds[0].Source = "a.wasm" }, false},
		{"relative target", func(s *Spec) { s.Binds[0].Target = "a.wasm" }, false},
		{"root target", func(s *Spec) { s.Binds[0].Target = "/" }, false},
		{"unclean target", func(s *Spec) { s.Binds[0].Target = "/x/../a.wasm" }, false},
		{"nested targets", func(s *Spec) { s.Binds = append(s.Binds, Bind{Source: "/srv", Target: "/a.wasm/b"}) }, false},
		{"same target", func(s *Spec) { s.Binds = append(s.Binds, Bind{Source: "/srv", Target: "/a.wasm"}) }, false},
		{"sibling targets", func(s *Spec) { s.Binds = append(s.Binds, Bind{Source: "/srv", Target: "/a.wasm2"}) }, true},
		{"env", func(s *Spec) { s.Env = []string{"GOMAXPROCS=1", "EMPTY="} }, true},
		{"env without =", func(s *Spec) { s.Env = []string{"GOMAXPROCS"} }, false},
		{"env LD_PRELOAD", func(s *Spec) { s.Env = []string{"LD_PRELOAD=/x.so"} }, false},
		{"long hostname", func(s *Spec) { s.Hostname = strings.Repeat("h", 65) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := good()
			tt.change(&s)
			err := s.validate()
			if tt.ok && err != nil {
				t.Fatalf("validate: %v", err)
			}
			if !tt.ok && !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("validate: %v, want ErrInvalidSpec", err)
			}
		})
	}
}
