package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/agentbox-dev/agentbox/internal/bench"
)

// benchCmd hands its arguments to the bench package, which parses its own flags.
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if err := bench.Main(ctx, args, stdout); err != nil {
		fmt.Fprintf(stderr, "agentbox bench: %v\n", err)
		return exitFailure
	}
	return exitOK
}
