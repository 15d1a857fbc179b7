package cli

import (
	"context"
	"errors"
	"io"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// runner is what `agentbox run` needs of a daemon: the Go client and the local engine both are.
type runner interface {
	Run(ctx context.Context, req api.RunRequest) (*api.Result, error)
	// RunStream runs as Run does and calls on with each chunk and event as it comes.
	RunStream(ctx context.Context, req api.RunRequest, on func(api.StreamEvent)) (*api.Result, error)
	// Artifact downloads an artifact of a run (a figure): its bytes and media type.
	Artifact(ctx context.Context, id string) ([]byte, string, error)
}

// Interface guards.
var (
	_ runner = (*client.Client)(nil)
	_ runner = localRunner{}
)

// localRunner runs through an in-process Manager, speaking the API's types so that the output
// and the errors are those of the daemon path. Errors become *client.Error, like the client's.
// Unlike the daemon, it shows internal errors in full: the user is the operator here.
type localRunner struct{ m *sandbox.Audited }

// Artifact reads an artifact from the local engine's store.
func (l localRunner) Artifact(_ context.Context, id string) ([]byte, string, error) {
	a, rc, err := l.m.Artifact(id)
	if err != nil {
		return nil, "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return b, a.MIME, err
}

func (l localRunner) Run(ctx context.Context, in api.RunRequest) (*api.Result, error) {
	return l.RunStream(ctx, in, nil)
}

// RunStream hands the chunks straight to on, from the runtime's goroutine: the terminal is the
// only client, so there is nothing to queue for.
func (l localRunner) RunStream(ctx context.Context, in api.RunRequest, on func(api.StreamEvent)) (*api.Result, error) {
	req, err := apiwire.RunRequestFromAPI(in)
	if on != nil {
		req.Output = sandbox.SinkFunc(func(s sandbox.Stream, p []byte) {
			on(api.StreamEvent{Type: string(s), Text: string(p)})
		})
	}
	if err == nil {
		var res *sandbox.Result
		if res, err = l.m.Run(ctx, &req); err == nil {
			return apiwire.ResultToAPI(res), nil
		}
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	status, body := apiwire.ErrorResponse(err)
	return nil, &client.Error{Status: status, Code: body.Error.Code, Message: body.Error.Message,
		Hint: body.Error.Hint, Result: body.Result}
}
