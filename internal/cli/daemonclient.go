package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
)

// DaemonOptions say which daemon a client command talks to; the zero value finds it as every
// client does (AGENTBOX_URL, else the default URL; AGENTBOX_API_KEY, else the data directory's
// api_key file).
type DaemonOptions struct {
	URL, APIKey, DataDir string
}

// client makes the API client of the daemon.
func (o DaemonOptions) client() (*client.Client, error) {
	u := o.URL
	if u == "" {
		u = os.Getenv("AGENTBOX_URL")
	}
	if u == "" {
		u = client.DefaultURL
	}
	return client.New(u, discoverKey(RunOptions{APIKey: o.APIKey, DataDir: o.DataDir}))
}

// apiFailure prints an API error (with its hint) or a transport error, and returns the exit
// code: the one `agentbox run` gives the error's code, else 1.
func apiFailure(ctx context.Context, w io.Writer, cmd string, err error) int {
	var ce *client.Error
	if errors.As(err, &ce) {
		fmt.Fprintf(w, "agentbox %s: %s\n", cmd, ce.Error())
		if code, ok := runExitCodes[ce.Code]; ok {
			return code
		}
		return exitFailure
	}
	if ctx.Err() != nil {
		fmt.Fprintf(w, "agentbox %s: interrupted\n", cmd)
		return exitInterrupted
	}
	fmt.Fprintf(w, "agentbox %s: %v (is `agentbox serve` running? AGENTBOX_URL or --url sets the address)\n", cmd, err)
	return runExitCodes[api.CodeRuntimeUnavailable]
}

// errResult is what the code produced before an API error ended its run, or nil.
func errResult(err error) *api.Result {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Result
	}
	return nil
}
