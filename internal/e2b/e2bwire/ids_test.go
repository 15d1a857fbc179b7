package e2bwire_test

import (
	"testing"

	"github.com/agentbox-dev/agentbox/internal/e2b/e2bwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

func TestIDsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ session, sandbox string }{
		{"sb_0123456789abcdef", "sb0123456789abcdef"},
		{"sb_n1-0123456789abcdef", "sbn1-0123456789abcdef"},
		{"sb_" + "abcdefghijklmnopqrstuvwxyz012345" + "-0123456789abcdef", "sb" + "abcdefghijklmnopqrstuvwxyz012345" + "-0123456789abcdef"},
	} {
		got, err := e2bwire.SandboxID(tt.session)
		if err != nil || got != tt.sandbox {
			t.Errorf("SandboxID(%q) = %q, %v; want %q", tt.session, got, err, tt.sandbox)
			continue
		}
		if len("49983-"+got) > 63 {
			t.Errorf("%q makes a host label of %d characters", got, len("49983-"+got))
		}
		back, err := e2bwire.SessionID(got)
		if err != nil || back != tt.session {
			t.Errorf("SessionID(%q) = %q, %v; want %q", got, back, err, tt.session)
		}
	}
}

func TestIDsRefused(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "sb", "sb_", "xb_0123", "sb_ABC", "sb_a.b", "sb_-a", "sb_a_b"} {
		if got, err := e2bwire.SandboxID(s); err == nil {
			t.Errorf("SandboxID(%q) = %q, want an error", s, got)
		}
	}
	for _, s := range []string{"", "sb", "i1a2b3c4d5", "SB0123", "sb0123.x", "sb-0123", "sb0123-"} {
		got, err := e2bwire.SessionID(s)
		if err == nil {
			t.Errorf("SessionID(%q) = %q, want an error", s, got)
		} else if sandbox.KindOf(err) != sandbox.KindNotFound {
			t.Errorf("SessionID(%q): %v, want not_found", s, err)
		}
	}
}
