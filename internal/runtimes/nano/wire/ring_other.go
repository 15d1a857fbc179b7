//go:build !linux

package wire

import "os"

// NewRing: only Linux shares a ring; frames go through the pipe.
func NewRing(int, int) (*Ring, *os.File, error) { return nil, nil, ErrNoRing }

// OpenRing: only Linux shares a ring.
func OpenRing(*os.File) (*Ring, error) { return nil, ErrNoRing }

// Close does nothing: there is no ring here.
func (r *Ring) Close() error { return nil }

func (r *Ring) tail() uint64   { return 0 }
func (r *Ring) setTail(uint64) {}
