package cli

import (
	"context"
	"fmt"
	"io"
)

// benchCmd hands its arguments to the bench package, which parses its own flags.
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if err := benchMain(ctx, args, stdout); err != nil {
		fmt.Fprintf(stderr, "agentbox bench: %v\n", err)
		return exitFailure
	}
	return exitOK
}
