//go:build !linux

package jail

import (
	"errors"
	"os"
	"os/exec"
)

// ErrUnsupported is returned by Command and LockDown off Linux.
var ErrUnsupported = errors.New("jail: only supported on linux")

// Command is not supported off Linux.
func Command(spec Spec, args ...string) (*exec.Cmd, error) { return nil, ErrUnsupported }

// MaybeInit does nothing off Linux.
func MaybeInit() {}

// LockDown is not supported off Linux.
func LockDown(allow []string) error { return ErrUnsupported }

// LockDownIoctl is not supported off Linux.
func LockDownIoctl(allow []string, ioctls []uint32) error { return ErrUnsupported }

// TakeProcSelf opens nothing off Linux.
func TakeProcSelf(names ...string) ([]*os.File, error) { return nil, nil }
