package heavy

import (
	"os"
	"strings"
	"testing"
)

// The version setup builds is the one go.mod pins with its tool directive.
func TestRunscVersionMatchesGoMod(t *testing.T) {
	b, err := os.ReadFile("../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	mod := string(b)
	if !strings.Contains(mod, "\ntool "+RunscModule+"\n") && !strings.Contains(mod, "\n\t"+RunscModule+"\n") {
		t.Errorf("go.mod has no `tool %s` directive", RunscModule)
	}
	want := "gvisor.dev/gvisor " + RunscVersion
	if !strings.Contains(mod, want) {
		t.Errorf("go.mod does not require %s: RunscVersion and go.mod disagree", want)
	}
}
