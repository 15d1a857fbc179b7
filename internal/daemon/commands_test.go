package daemon_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
)

// TestCommands runs commands in a real gVisor session: foreground (streamed and not), shell
// lines, cwd, env and stdin, the session's files, a background command whose logs are read while
// it runs and which is then killed, the timeout, and nano's refusal.
func TestCommands(t *testing.T) {
	c := startHeavy(t)
	ctx := context.Background()
	s, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "heavy", Env: map[string]string{"GREETING": "hello"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseSession(ctx, s.ID)

	t.Run("Foreground", func(t *testing.T) {
		if _, err := c.RunInSession(ctx, s.ID, api.RunRequest{Code: "open('data.txt', 'w').write('from python\\n')", Timeout: 60}); err != nil {
			t.Fatal(err)
		}
		cmd, err := c.RunCommand(ctx, s.ID, api.CommandRequest{Cmd: "cat data.txt; echo $GREETING $EXTRA; pwd; id -un; echo oops >&2; exit 3",
			Env: map[string]string{"EXTRA": "world"}})
		if err != nil {
			t.Fatal(err)
		}
		if cmd.Status != "exited" || cmd.ExitCode != 3 || cmd.Stdout != "from python\nhello world\n/home/user\nuser\n" || cmd.Stderr != "oops\n" {
			t.Fatalf("got %+v", cmd)
		}
		if !strings.HasPrefix(cmd.ID, "cmd_") || cmd.EndedAt == nil {
			t.Fatalf("got %+v", cmd)
		}
	})
	t.Run("ArgvCwdStdin", func(t *testing.T) {
		cmd, err := c.RunCommand(ctx, s.ID, api.CommandRequest{Argv: []string{"sh", "-c", "pwd; tr a-z A-Z"}, Cwd: "/tmp", Stdin: "shout\n"})
		if err != nil {
			t.Fatal(err)
		}
		if cmd.Status != "exited" || cmd.ExitCode != 0 || cmd.Stdout != "/tmp\nSHOUT\n" {
			t.Fatalf("got %+v", cmd)
		}
		cmd, err = c.RunCommand(ctx, s.ID, api.CommandRequest{Argv: []string{"no-such-program-xyz"}})
		if err != nil || cmd.ExitCode != 127 || !strings.Contains(cmd.Stderr, "not found") {
			t.Fatalf("got %+v, %v", cmd, err)
		}
	})
	t.Run("Streamed", func(t *testing.T) {
		start := time.Now()
		var first time.Duration
		var out string
		cmd, err := c.RunCommandStream(ctx, s.ID, api.CommandRequest{Cmd: "for i in 1 2 3 4 5 6 7 8 9 10; do echo line $i; sleep 0.2; done"},
			func(ev api.StreamEvent) {
				if ev.Type == api.EventStdout {
					if first == 0 {
						first = time.Since(start)
					}
					out += ev.Text
				}
			})
		total := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("first line after %v of %v", first, total)
		if out != cmd.Stdout || strings.Count(out, "line") != 10 || first == 0 || total-first < time.Second {
			t.Fatalf("streamed %q (first after %v of %v), command %+v", out, first, total, cmd)
		}
	})
	t.Run("BackgroundLogsAndKill", func(t *testing.T) {
		cmd, err := c.RunCommand(ctx, s.ID, api.CommandRequest{Cmd: "i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.1; done", Background: true, Timeout: 120})
		if err != nil {
			t.Fatal(err)
		}
		if cmd.Status != "running" {
			t.Fatalf("got %+v", cmd)
		}
		var seen *api.Command
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			seen, err = c.Command(ctx, s.ID, cmd.ID)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Count(seen.Stdout, "tick") >= 3 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if seen.Status != "running" || strings.Count(seen.Stdout, "tick") < 3 {
			t.Fatalf("logs while it runs: %+v", seen)
		}
		list, err := c.Commands(ctx, s.ID)
		if err != nil || len(list) == 0 || list[len(list)-1].ID != cmd.ID {
			t.Fatalf("list %+v, %v", list, err)
		}
		killed, err := c.KillCommand(ctx, s.ID, cmd.ID)
		if err != nil {
			t.Fatal(err)
		}
		if killed.Status != "killed" || killed.EndedAt == nil {
			t.Fatalf("got %+v", killed)
		}
		// The session's interpreter is untouched.
		res, err := c.RunInSession(ctx, s.ID, api.RunRequest{Code: "print(open('data.txt').read().strip())"})
		if err != nil || res.Stdout != "from python\n" {
			t.Fatalf("run after the kill: %+v, %v", res, err)
		}
	})
	t.Run("Timeout", func(t *testing.T) {
		cmd, err := c.RunCommand(ctx, s.ID, api.CommandRequest{Cmd: "echo started; sleep 60", Timeout: 1})
		if err != nil {
			t.Fatal(err)
		}
		if cmd.Status != "timeout" || cmd.Stdout != "started\n" {
			t.Fatalf("got %+v", cmd)
		}
	})
	t.Run("Audited", func(t *testing.T) {
		recs, err := c.Audit(ctx, client.AuditQuery{Session: s.ID, Kind: "command"})
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte("echo started; sleep 60"))
		found := false
		for _, r := range recs {
			if r.Run != nil && r.Run.CodeSHA256 == hex.EncodeToString(sum[:]) && r.Decision == "allow" {
				found = true
			}
		}
		if len(recs) < 6 || !found {
			t.Fatalf("%d command records, the timed-out one found: %v", len(recs), found)
		}
	})
	t.Run("UnknownCommand", func(t *testing.T) {
		_, err := c.Command(ctx, s.ID, "cmd_nope")
		var e *client.Error
		if !errors.As(err, &e) || e.Code != api.CodeNotFound || !strings.Contains(e.Message, "cmd_nope") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("NanoRefuses", func(t *testing.T) {
		n, err := c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "nano"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseSession(ctx, n.ID)
		_, err = c.RunCommand(ctx, n.ID, api.CommandRequest{Cmd: "ls"})
		var e *client.Error
		if !errors.As(err, &e) || e.Code != api.CodeInvalidRequest || !strings.Contains(e.Message, "no processes") || !strings.Contains(e.Hint, "heavy") {
			t.Fatalf("got %v", err)
		}
	})
}
