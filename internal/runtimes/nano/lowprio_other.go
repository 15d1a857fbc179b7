//go:build !linux

package nano

func lowPriority(fn func()) { fn() }
