//go:build !linux

package dirtypages

import (
	"errors"
	"os"
)

// Page is the granularity of the tracking.
const Page = 4096

// ErrUnsupported wraps the reason Open could not set tracking up.
var ErrUnsupported = errors.New("dirty-page tracking unavailable")

// Tracker is unavailable off Linux.
type Tracker struct{}

func Open(pagemap *os.File) (*Tracker, error)                  { return nil, ErrUnsupported }
func Requests() []uint32                                       { return nil }
func (t *Tracker) Close() error                                { return nil }
func (t *Tracker) Register(b []byte) error                     { return ErrUnsupported }
func (t *Tracker) Clean(b []byte) error                        { return ErrUnsupported }
func (t *Tracker) Untrack(b []byte) error                      { return ErrUnsupported }
func (t *Tracker) Written(b []byte, fn func(off, n int)) error { return ErrUnsupported }
func (t *Tracker) Peek(b []byte, fn func(off, n int)) error    { return ErrUnsupported }
