package cli

import (
	"context"
	"errors"
	"io"
)

// benchMain runs `agentbox bench`.
//
// TODO(lead): internal/bench has no Main yet. When it has
// `func Main(ctx context.Context, args []string, out io.Writer) error`, replace this stub with
// `var benchMain = bench.Main` (importing internal/bench) and delete this file.
var benchMain = func(ctx context.Context, args []string, out io.Writer) error {
	return errors.New("bench is not built yet (stub in internal/cli/stubs.go)")
}
