package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/agentbox-dev/agentbox/api"
)

// RunCommand runs a command in a heavy session (POST /v1/sessions/{id}/commands). In the
// foreground it returns the command once it has ended; with req.Background at once, running.
func (c *Client) RunCommand(ctx context.Context, id string, req api.CommandRequest) (*api.Command, error) {
	var out api.Command
	if err := c.do(ctx, http.MethodPost, commandsPath(id), req, &out, http.StatusOK, http.StatusAccepted); err != nil {
		return nil, err
	}
	return &out, nil
}

// RunCommandStream runs a foreground command and calls on with its stdout and stderr events as
// they come; it returns the command as it ended.
func (c *Client) RunCommandStream(ctx context.Context, id string, req api.CommandRequest, on func(api.StreamEvent)) (*api.Command, error) {
	var cmd *api.Command
	_, err := c.streamEvents(ctx, commandsPath(id), req, func(ev api.StreamEvent) bool {
		if ev.Type == api.EventExit && ev.Command != nil {
			cmd = ev.Command
			return true
		}
		if on != nil {
			on(ev)
		}
		return false
	}, func(b []byte) error { cmd = new(api.Command); return jsonUnmarshal(b, cmd) })
	if err != nil {
		return nil, err
	}
	return cmd, nil
}

// Commands lists the commands a session keeps (GET /v1/sessions/{id}/commands).
func (c *Client) Commands(ctx context.Context, id string) ([]api.Command, error) {
	var out api.CommandList
	if err := c.do(ctx, http.MethodGet, commandsPath(id), nil, &out, http.StatusOK); err != nil {
		return nil, err
	}
	return out.Commands, nil
}

// Command reads a command's status and output so far (GET /v1/sessions/{id}/commands/{cid}).
func (c *Client) Command(ctx context.Context, id, cid string) (*api.Command, error) {
	var out api.Command
	if err := c.do(ctx, http.MethodGet, commandsPath(id)+"/"+url.PathEscape(cid), nil, &out, http.StatusOK); err != nil {
		return nil, err
	}
	return &out, nil
}

// KillCommand kills a command (DELETE /v1/sessions/{id}/commands/{cid}).
func (c *Client) KillCommand(ctx context.Context, id, cid string) (*api.Command, error) {
	var out api.Command
	if err := c.do(ctx, http.MethodDelete, commandsPath(id)+"/"+url.PathEscape(cid), nil, &out, http.StatusOK); err != nil {
		return nil, err
	}
	return &out, nil
}

func commandsPath(id string) string { return "/v1/sessions/" + url.PathEscape(id) + "/commands" }
