package setup

import (
	"context"
	"io"
)

// DefaultNanoSource is the build setup installs unless told otherwise.
const DefaultNanoSource = "npm"

func buildSource(ctx context.Context, dir string, out io.Writer) (manifest, error) {
	panic("being written")
}
