//go:build !linux

package worker

import "runtime"

func lowerThread() { runtime.LockOSThread() }
