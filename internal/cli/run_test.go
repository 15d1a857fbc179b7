package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

const key = "cli-test-key"

// daemonURL serves the daemon's real front doors over a fake runtime on loopback.
func daemonURL(t *testing.T) string {
	t.Helper()
	m := newFakeManager(t)
	t.Cleanup(func() { m.Close() })
	srv, err := daemon.NewFrontDoors(m, daemon.FrontDoorOptions{APIKey: key, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs.URL
}

// deadURL is a loopback URL nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

type runOut struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, opts cli.RunOptions) runOut {
	t.Helper()
	var out, errOut bytes.Buffer
	opts.Stdout, opts.Stderr = &out, &errOut
	if opts.Stdin == nil {
		opts.Stdin = strings.NewReader("")
	}
	if opts.NewManager == nil {
		opts.NewManager = fakeFactory(t, nil)
	}
	code := cli.RunCode(context.Background(), opts)
	return runOut{code, out.String(), errOut.String()}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunThroughDaemon(t *testing.T) {
	url := daemonURL(t)
	script := writeFile(t, "hello.py", "print('hi')\n")
	got := runCLI(t, cli.RunOptions{File: script, URL: url, APIKey: key})
	if got.code != 0 || got.stdout != "ran: print('hi')\n" || got.stderr != "note\n" {
		t.Errorf("got %+v", got)
	}
}

func TestRunFromStdin(t *testing.T) {
	url := daemonURL(t)
	got := runCLI(t, cli.RunOptions{File: "-", Stdin: strings.NewReader("1+1"), URL: url, APIKey: key})
	if got.code != 0 || got.stdout != "ran: 1+1" {
		t.Errorf("got %+v", got)
	}
}

func TestRunExitCodes(t *testing.T) {
	url := daemonURL(t)
	tests := []struct {
		name, code string
		exit       int
		stdout     string
		stderr     string
	}{
		{"exception", "raise", 1, "", "ValueError: bad"},
		{"sys.exit", "exit3", 3, "", ""},
		{"timeout keeps output", "timeout", 124, "started\n", "agentbox: timeout: the code ran past its timeout of 1 s (raise the timeout)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runCLI(t, cli.RunOptions{File: "-", Stdin: strings.NewReader(tt.code), URL: url, APIKey: key})
			if got.code != tt.exit || got.stdout != tt.stdout || !strings.Contains(got.stderr, tt.stderr) {
				t.Errorf("got %+v, want exit %d stdout %q stderr containing %q", got, tt.exit, tt.stdout, tt.stderr)
			}
		})
	}
	got := runCLI(t, cli.RunOptions{File: "-", Stdin: strings.NewReader("x"), URL: url, APIKey: "wrong"})
	if got.code != 77 || !strings.Contains(got.stderr, "agentbox: unauthorized: ") {
		t.Errorf("wrong key: %+v", got)
	}
	got = runCLI(t, cli.RunOptions{File: "-", Stdin: strings.NewReader("x"), URL: url, APIKey: key, Timeout: 1e6})
	if got.code != 65 || !strings.Contains(got.stderr, "agentbox: invalid_request: timeout") {
		t.Errorf("timeout above maximum: %+v", got)
	}
	got = runCLI(t, cli.RunOptions{File: filepath.Join(t.TempDir(), "missing.py"), URL: url, APIKey: key})
	if got.code != 2 || !strings.Contains(got.stderr, "missing.py") {
		t.Errorf("missing file: %+v", got)
	}
}

func TestRunJSONAndFiles(t *testing.T) {
	url := daemonURL(t)
	data := writeFile(t, "data.csv", "a,b\n1,2\n")
	got := runCLI(t, cli.RunOptions{
		File: "-", Stdin: strings.NewReader("x"), URL: url, APIKey: key, JSON: true,
		Files: []cli.FileSpec{{Local: data, Remote: "in/data.csv"}},
	})
	if got.code != 0 {
		t.Fatalf("got %+v", got)
	}
	var res api.Result
	if err := json.Unmarshal([]byte(got.stdout), &res); err != nil {
		t.Fatalf("--json output is not a result: %v\n%s", err, got.stdout)
	}
	if res.Stdout != "ran: x" || res.Runtime != "nano" || len(res.Files) != 1 ||
		res.Files[0].Path != "in/data.csv" || string(res.Files[0].Content) != "a,b\n1,2\n" {
		t.Errorf("result %+v", res)
	}
	// An error in --json mode prints the error body, partial result included.
	got = runCLI(t, cli.RunOptions{File: "-", Stdin: strings.NewReader("timeout"), URL: url, APIKey: key, JSON: true})
	var eb api.ErrorResponse
	if err := json.Unmarshal([]byte(got.stdout), &eb); err != nil || got.code != 124 ||
		eb.Error.Code != "timeout" || eb.Result == nil || eb.Result.Stdout != "started\n" {
		t.Errorf("json error: %+v (%v)", got, err)
	}
}

func TestRunExplicitURLMustAnswer(t *testing.T) {
	called := false
	got := runCLI(t, cli.RunOptions{File: "-", Stdin: strings.NewReader("x"), URL: deadURL(t), APIKey: key,
		NewManager: fakeFactory(t, &called)})
	if got.code != 69 || called || !strings.Contains(got.stderr, "no agentbox daemon answers") {
		t.Errorf("got %+v, local engine started: %v", got, called)
	}
}

func TestRunFallsBackToLocalEngine(t *testing.T) {
	t.Setenv("AGENTBOX_URL", "")
	t.Setenv("AGENTBOX_DATA_DIR", t.TempDir())
	called := false
	got := runCLI(t, cli.RunOptions{File: "-", Stdin: strings.NewReader("raise"), DefaultURL: deadURL(t),
		NewManager: fakeFactory(t, &called)})
	if !called || got.code != 1 || !strings.Contains(got.stderr, "starting a local engine") ||
		!strings.Contains(got.stderr, "ValueError: bad") {
		t.Errorf("got %+v, local engine started: %v", got, called)
	}
	// Errors of the local engine look like the daemon's.
	got = runCLI(t, cli.RunOptions{File: "-", Stdin: strings.NewReader("timeout"), Local: true})
	if got.code != 124 || got.stdout != "started\n" || !strings.Contains(got.stderr, "agentbox: timeout: ") ||
		strings.Contains(got.stderr, "starting a local engine") {
		t.Errorf("--local timeout: %+v", got)
	}
}

func TestRunFindsKeyInDataDir(t *testing.T) {
	t.Setenv("AGENTBOX_API_KEY", "")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "api_key"), []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got := runCLI(t, cli.RunOptions{File: "-", Stdin: strings.NewReader("x"), URL: daemonURL(t), DataDir: dir})
	if got.code != 0 {
		t.Errorf("key from --data-dir: %+v", got)
	}
	t.Setenv("AGENTBOX_DATA_DIR", dir)
	got = runCLI(t, cli.RunOptions{File: "-", Stdin: strings.NewReader("x"), URL: daemonURL(t)})
	if got.code != 0 {
		t.Errorf("key from AGENTBOX_DATA_DIR: %+v", got)
	}
}

func TestMainParsesRunFlags(t *testing.T) {
	url := daemonURL(t)
	t.Setenv("AGENTBOX_API_KEY", key)
	script := writeFile(t, "s.py", "print(1)")
	var out, errOut bytes.Buffer
	// Flags after the file work too.
	code := cli.Main(context.Background(), []string{"run", script, "--url", url, "--timeout", "1m", "--memory", "1G", "--json"},
		strings.NewReader(""), &out, &errOut)
	if code != 0 || !strings.Contains(out.String(), `"stdout": "ran: print(1)"`) {
		t.Errorf("exit %d stdout %s stderr %s", code, out.String(), errOut.String())
	}
	for _, args := range [][]string{
		{"run"},
		{"run", "a.py", "b.py"},
		{"run", "--timeout", "soon", "a.py"},
		{"run", "--memory", "lots", "a.py"},
		{"frobnicate"},
	} {
		out.Reset()
		errOut.Reset()
		if code := cli.Main(context.Background(), args, strings.NewReader(""), &out, &errOut); code != 2 || errOut.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut.String())
		}
	}
	out.Reset()
	if code := cli.Main(context.Background(), []string{"version"}, nil, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "agentbox ") {
		t.Errorf("version: %d %q", code, out.String())
	}
	errOut.Reset()
	if code := cli.Main(context.Background(), []string{"bench"}, nil, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "nano") {
		t.Errorf("bench without a benchmark name: %d %q, want an error naming the benchmarks", code, errOut.String())
	}
}

// A local engine that cannot start says why and what to do, e.g. when a daemon holds the data
// directory's audit log.
func TestRunLocalEngineRefusedShowsHint(t *testing.T) {
	busy := func(context.Context, config.Config, *slog.Logger) (*sandbox.Audited, error) {
		return nil, sandbox.Errorf(sandbox.KindConflict, "audit log X is in use by another agentbox process").
			WithHint("a daemon with this data directory is running: send requests to it")
	}
	got := runCLI(t, cli.RunOptions{File: "-", Stdin: strings.NewReader("print(1)"), Local: true, DataDir: t.TempDir(), NewManager: busy})
	if got.code != 69 || !strings.Contains(got.stderr, "in use by another agentbox process") || !strings.Contains(got.stderr, "hint: a daemon with this data directory is running") {
		t.Fatalf("got %+v", got)
	}
}
