package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

// emit writes a benchmark's results, as indented JSON or as its Markdown report, and turns an
// interrupted run or failed measurements into the command's error.
func emit[R any](ctx context.Context, out io.Writer, name string, asJSON bool, res R, report func(io.Writer, R), failed int) error {
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		report(out, res)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("bench %s: %d measurements failed (see the report)", name, failed)
	}
	return nil
}
