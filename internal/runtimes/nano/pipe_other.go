//go:build !linux

package nano

import "io"

func growPipe(io.Reader) {}
