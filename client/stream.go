package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/agentbox-dev/agentbox/api"
)

// RunStream runs code once, like Run, and calls on with each event as the daemon streams it
// (stdout and stderr chunks as the code writes them, outputs, artifacts, dropped markers; see
// api.StreamEvent). It returns what Run would: the result, or an *Error with the partial result.
// on is called from the caller's goroutine, in order, and not for the final result or error
// event, which RunStream returns.
func (c *Client) RunStream(ctx context.Context, req api.RunRequest, on func(api.StreamEvent)) (*api.Result, error) {
	return c.stream(ctx, "/v1/run", req, on)
}

// RunInSessionStream runs code in a session, like RunInSession, streaming as RunStream does.
func (c *Client) RunInSessionStream(ctx context.Context, id string, req api.RunRequest, on func(api.StreamEvent)) (*api.Result, error) {
	return c.stream(ctx, "/v1/sessions/"+url.PathEscape(id)+"/run", req, on)
}

// stream posts in to path asking for NDJSON and reads the events to the run's result.
func (c *Client) stream(ctx context.Context, path string, in any, on func(api.StreamEvent)) (*api.Result, error) {
	var res *api.Result
	_, err := c.streamEvents(ctx, path, in, func(ev api.StreamEvent) bool {
		if ev.Type == api.EventResult {
			res = ev.Result
			return true
		}
		if on != nil {
			on(ev)
		}
		return false
	}, func(b []byte) error { res = new(api.Result); return jsonUnmarshal(b, res) })
	if err == nil && res == nil {
		err = fmt.Errorf("agentbox client: POST %s: a result event without a result", path)
	}
	return res, err
}

// streamEvents posts in to path asking for NDJSON and hands each event to take until take says
// it was the last; an error event becomes an *Error. A daemon that answered with plain JSON
// instead has its body handed to whole.
func (c *Client) streamEvents(ctx context.Context, path string, in any, take func(api.StreamEvent) bool, whole func([]byte) error) (bool, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return false, fmt.Errorf("agentbox client: encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.String()+path, bytes.NewReader(b))
	if err != nil {
		return false, fmt.Errorf("agentbox client: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", api.MediaTypeNDJSON)
	req.Header.Set("User-Agent", c.userAgent)
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return false, fmt.Errorf("agentbox client: POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, readError(resp)
	}
	if ct := resp.Header.Get("Content-Type"); ct == "application/json" {
		body, err := io.ReadAll(resp.Body)
		if err == nil {
			err = whole(body)
		}
		if err != nil {
			return false, fmt.Errorf("agentbox client: POST %s: decode answer: %w", path, err)
		}
		return true, nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 256<<20) // a result event holds the whole result
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var ev api.StreamEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return false, fmt.Errorf("agentbox client: POST %s: decode event: %w", path, err)
		}
		if ev.Type == api.EventError {
			e := &Error{Status: statusForCode(ev.Error), Result: ev.Result, RequestID: resp.Header.Get("X-Request-Id")}
			if ev.Error != nil {
				e.Code, e.Message, e.Hint = ev.Error.Code, ev.Error.Message, ev.Error.Hint
			}
			return false, e
		}
		if take(ev) {
			return true, nil
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("agentbox client: POST %s: reading the stream: %w", path, err)
	}
	return false, fmt.Errorf("agentbox client: POST %s: the stream ended without its last event", path)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// statusForCode is the HTTP status the daemon gives d's code, for errors that arrive inside a
// stream, whose own status was 200.
func statusForCode(d *api.ErrorDetail) int {
	if d == nil {
		return http.StatusInternalServerError
	}
	return api.StatusOfCode(d.Code)
}
