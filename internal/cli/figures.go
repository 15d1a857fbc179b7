package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentbox-dev/agentbox/api"
)

// figures handles the figures (artifacts) a run made, after its output: with --figures DIR it
// downloads them into DIR and names each file; without, it says how many there were and how to
// get them, since a terminal shows none of them. code is the exit code so far: a figure that
// cannot be saved makes a successful run exit 1.
func figures(ctx context.Context, opts RunOptions, r runner, res *api.Result, err error, code int) int {
	if res == nil {
		res = errResult(err)
	}
	if res == nil || len(res.Artifacts) == 0 {
		return code
	}
	if opts.Figures == "" {
		if !opts.JSON {
			names := make([]string, len(res.Artifacts))
			for i, a := range res.Artifacts {
				names[i] = a.Name
			}
			fmt.Fprintf(opts.Stderr, "agentbox: the code made %d figure(s) not shown here (%s): --figures DIR saves them as files\n",
				len(res.Artifacts), strings.Join(names, ", "))
		}
		return code
	}
	if err := os.MkdirAll(opts.Figures, 0o755); err != nil {
		fmt.Fprintf(opts.Stderr, "agentbox: figures not saved: %v\n", err)
		return failed(code)
	}
	for _, a := range res.Artifacts {
		name := filepath.Base(a.Name)
		if name == "." || name == "/" || name == "" {
			name = a.ID
		}
		path := filepath.Join(opts.Figures, name)
		b, _, err := r.Artifact(ctx, a.ID)
		if err == nil {
			err = os.WriteFile(path, b, 0o644)
		}
		if err != nil {
			fmt.Fprintf(opts.Stderr, "agentbox: figure %s not saved: %v\n", a.Name, err)
			code = failed(code)
			continue
		}
		fmt.Fprintf(opts.Stderr, "agentbox: saved %s (%s, %d bytes)\n", path, a.MIME, len(b))
	}
	return code
}

// failed is the exit code of a run whose figures could not be saved: its own, unless that was 0.
func failed(code int) int {
	if code == exitOK {
		return exitFailure
	}
	return code
}
