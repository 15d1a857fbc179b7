package sandbox_test

import (
	"slices"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// A durable snapshot is scrubbed of every env value of MinSecret bytes or more, and of no
// shorter one.
func TestSecretsOf(t *testing.T) {
	env := map[string]string{"TOKEN": "tok-12345", "EIGHT": "12345678", "SHORT": "1234567", "LANG": "en_US", "EMPTY": ""}
	var got []string
	for _, s := range sandbox.SecretsOf(env) {
		got = append(got, string(s))
	}
	slices.Sort(got)
	if want := []string{"12345678", "tok-12345"}; !slices.Equal(got, want) {
		t.Fatalf("SecretsOf = %q, want %q", got, want)
	}
	if s := sandbox.SecretsOf(nil); len(s) != 0 {
		t.Fatalf("SecretsOf(nil) = %q", s)
	}
}
