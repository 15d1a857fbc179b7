package cli_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/cli"
)

// `agentbox mcp add NAME --url URL [--profile P]` registers a remote server (no image, no
// command); `mcp list` shows it as remote with its profile; a URL that is not http(s), or a URL
// beside an image, is refused as a usage error.
func TestMCPAddRemote(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := cli.Main(context.Background(), append([]string{"mcp"}, append(args, "--data-dir", dir)...), strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, errs := run("add", "docs", "--url", "https://mcp.example.com/mcp", "--profile", "docs")
	if code != 0 || !strings.Contains(out, "remote at https://mcp.example.com/mcp") || !strings.Contains(out, "profile docs") {
		t.Fatalf("add --url: %d %q %q", code, out, errs)
	}
	code, out, errs = run("add", "wiki", "--url", "http://wiki.example.com/mcp")
	if code != 0 || !strings.Contains(out, "profile default") {
		t.Fatalf("add --url without a profile: %d %q %q", code, out, errs)
	}
	code, out, _ = run("list")
	if code != 0 || !strings.Contains(out, "docs") || !strings.Contains(out, "(remote)") || !strings.Contains(out, "https://mcp.example.com/mcp") {
		t.Errorf("list: %d %q", code, out)
	}
	if code, _, errs := run("add", "bad", "--url", "ftp://x.example.com/"); code != 2 || !strings.Contains(errs, "http:// or https://") {
		t.Errorf("an ftp URL: %d %q", code, errs)
	}
	if code, _, errs := run("add", "both", "--url", "http://x.example.com/", "--image", "node-mcp"); code != 2 || !strings.Contains(errs, "no image nor command") {
		t.Errorf("a URL and an image: %d %q", code, errs)
	}
}
