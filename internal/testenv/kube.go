package testenv

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var kubeBuild struct {
	once        sync.Once
	dir, root   string
	err         error
	unreachable bool
}

// Kube is a built local Kubernetes: the directory of its binaries (scripts/cluster/kube-build.sh:
// kube-apiserver, kubelet, kubectl, containerd, runsc and its shim...) and the module root, where
// scripts/cluster/kube-local.sh and kube-image.sh are.
type Kube struct {
	BinDir, Root string
}

// Script is the path of one of the scripts under scripts/cluster.
func (k Kube) Script(name string) string { return filepath.Join(k.Root, "scripts", "cluster", name) }

// Kubectl is the path of the kubectl built with the cluster.
func (k Kube) Kubectl() string { return filepath.Join(k.BinDir, "kubectl") }

// RequireKube returns the local Kubernetes binaries, built once per machine by
// scripts/cluster/kube-build.sh (cached by version outside the checkout; cold it takes 10+
// minutes, so scripts/test.sh builds them before the tests). It needs root, and skips t (or
// fails it, see Required) only when the Go module proxy cannot be reached (the script's exit 3).
func RequireKube(t testing.TB) Kube {
	t.Helper()
	RequireRoot(t)
	b := &kubeBuild
	b.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			b.err = err
			return
		}
		b.root = root
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(filepath.Join(root, "scripts", "cluster", "kube-build.sh"))
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err = cmd.Run()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee) && ee.ExitCode() == 3:
			b.unreachable = true
			b.err = errors.New(strings.TrimSpace(stderr.String()))
		case err != nil:
			b.err = errors.New("scripts/cluster/kube-build.sh: " + err.Error() + ": " + strings.TrimSpace(stderr.String()))
		default:
			b.dir = strings.TrimSpace(stdout.String())
		}
	})
	switch {
	case b.unreachable:
		Skip(t, "needs Kubernetes built from its Go modules (the module proxy): "+b.err.Error())
	case b.err != nil:
		t.Fatal(b.err)
	}
	return Kube{BinDir: b.dir, Root: b.root}
}
