package sandbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Package and image names are names, never versions, URLs or paths: nothing is installed.
func TestPackageNamesChecked(t *testing.T) {
	m, _ := newManager(t, sandbox.ManagerOptions{})
	ctx := context.Background()
	for _, req := range []*sandbox.RunRequest{
		{Code: "1", Tier: tierHeavy, Packages: []string{"pandas==2.0"}},
		{Code: "1", Tier: tierHeavy, Packages: []string{"https://evil.test/x.whl"}},
		{Code: "1", Tier: tierHeavy, Packages: []string{""}},
		{Code: "1", Tier: tierHeavy, Image: "../img"},
		{Code: "1", Tier: tierHeavy, Packages: make([]string, 65)},
	} {
		if _, err := m.Run(ctx, req); !errors.Is(err, sandbox.ErrInvalidRequest) {
			t.Errorf("packages %q image %q: %v, want invalid_request", req.Packages, req.Image, err)
		}
	}
	if _, err := m.CreateSession(ctx, sandbox.SessionOptions{Packages: []string{"numpy>=1"}}); !errors.Is(err, sandbox.ErrInvalidRequest) {
		t.Errorf("session with a version: %v", err)
	}
}

// Nano never gets packages or network: an explicit request for them is refused, not ignored.
func TestNanoRefusesPackagesAndNetwork(t *testing.T) {
	m, _ := newManager(t, sandbox.ManagerOptions{})
	ctx := context.Background()
	for _, req := range []*sandbox.RunRequest{
		{Code: "1", Tier: tierNano, Packages: []string{"pandas"}},
		{Code: "1", Tier: tierNano, Network: true},
	} {
		_, err := m.Run(ctx, req)
		if e := sandbox.AsError(err); !errors.Is(err, sandbox.ErrInvalidRequest) || e.Hint == "" {
			t.Errorf("%+v: %v, want invalid_request with a hint", req, err)
		}
	}
}

// Network is fixed when a session is created: a run cannot turn it on.
func TestSessionNetworkFixed(t *testing.T) {
	m, _ := newManager(t, sandbox.ManagerOptions{})
	ctx := context.Background()
	info, err := m.CreateSession(ctx, sandbox.SessionOptions{Tier: tierNano})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.RunInSession(ctx, info.ID, &sandbox.RunRequest{Code: "1", Network: true})
	if !errors.Is(err, sandbox.ErrInvalidRequest) || !strings.Contains(err.Error(), "fixed when a session is created") {
		t.Errorf("network in a session run: %v", err)
	}
}

// A session without file operations says so; a file over the per-file limit is refused before
// it reaches the sandbox.
func TestSessionFileLimits(t *testing.T) {
	m, _ := newManager(t, sandbox.ManagerOptions{})
	ctx := context.Background()
	info, err := m.CreateSession(ctx, sandbox.SessionOptions{Tier: tierNano})
	if err != nil {
		t.Fatal(err)
	}
	err = m.WriteFile(ctx, info.ID, "a.txt", []byte("x"))
	if e := sandbox.AsError(err); !errors.Is(err, sandbox.ErrInvalidRequest) || e.Hint == "" {
		t.Errorf("file ops on a session without them: %v", err)
	}
	big := make([]byte, sandbox.DefaultPolicy().MaxFileBytes+1)
	if err := m.WriteFile(ctx, info.ID, "a.txt", big); !errors.Is(err, sandbox.ErrInvalidRequest) || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a file over the limit: %v", err)
	}
	if _, err := m.ReadFile(ctx, info.ID, "../../etc/passwd"); !errors.Is(err, sandbox.ErrInvalidRequest) {
		t.Errorf("a path that climbs out: %v", err)
	}
	if _, err := m.ReadFile(ctx, "sb_nope", "a.txt"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("no such session: %v", err)
	}
}
