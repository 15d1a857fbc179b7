//go:build !linux

package engine

func lowerThisThread() {}
func leaveLowThread()  {}
func escapeLowThread() {}
