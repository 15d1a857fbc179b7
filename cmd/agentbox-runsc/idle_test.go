package main

import (
	"testing"

	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
)

func TestSubcommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		// How runsc starts its sandbox process (sandbox.createSandboxProcess): every flag as
		// --name=value, then boot and its own flags.
		{[]string{"--root=/run/x", "--platform=systrap", "--systrap-disable-fast-path=true", "boot", "--bundle=/b", "--controller-fd=4", "id"}, "boot"},
		{[]string{"--root=/run/x", "gofer", "--bundle=/b"}, "gofer"},
		// How the daemon calls runsc (box.go): the container's id is an argument after the verb.
		{[]string{"--root=/r", "--network=none", "restore", "--image-path", "/img", "--bundle", "/b", "boot"}, "restore"},
		{[]string{"--root=/r", "checkpoint", "--image-path", "/img", "id"}, "checkpoint"},
		{[]string{"--version"}, ""},
		{[]string{}, ""},
		{[]string{"--", "boot"}, ""},
	} {
		if got := subcommand(c.args); got != c.want {
			t.Errorf("subcommand(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}

func TestWantsVersion(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"--version"}, true},
		{[]string{"-version"}, true},
		{[]string{"--root=/r", "--version=true"}, true},
		{[]string{"version"}, false},
		{[]string{"--root=/r"}, false},
	} {
		if got := wantsVersion(c.args); got != c.want {
			t.Errorf("wantsVersion(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

// The sentry releases once it has been quiet for a tick after allocating enough, not while it
// allocates, and not again until it has allocated enough anew.
func TestIdlePolicy(t *testing.T) {
	const mib = 1 << 20
	var p idlePolicy
	steps := []struct {
		allocated uint64
		release   bool
		why       string
	}{
		{10 * mib, false, "the first reading only starts the count"},
		{30 * mib, false, "restoring: allocating"},
		{30*mib + 1000, true, "quiet after the restore"},
		{30*mib + 2000, false, "still quiet, nothing new to return"},
		{30*mib + 3000, false, "still quiet"},
		{32 * mib, false, "a cell: allocating"},
		{32*mib + 10, true, "quiet after the cell"},
		{32*mib + 600<<10, false, "a small cell: under the release threshold since the last"},
		{32*mib + 610<<10, false, "quiet, but too little allocated since the last release"},
		{34 * mib, false, "allocating again"},
		{34 * mib, true, "quiet"},
	}
	for i, s := range steps {
		if got := p.step(s.allocated); got != s.release {
			t.Errorf("tick %d (%s): release = %v, want %v", i, s.why, got, s.release)
		}
	}
}

// Setup tells a current build of ours by the line this main prints.
func TestBuildMatchesSetup(t *testing.T) {
	if build != heavy.RunscBuild {
		t.Fatalf("cmd/agentbox-runsc says %q, heavy.RunscBuild is %q: change both", build, heavy.RunscBuild)
	}
}
