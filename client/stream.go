package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

// stream posts in to path asking for NDJSON and reads the events to the last.
func (c *Client) stream(ctx context.Context, path string, in any, on func(api.StreamEvent)) (*api.Result, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("agentbox client: encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.String()+path, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("agentbox client: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", api.MediaTypeNDJSON)
	req.Header.Set("User-Agent", c.userAgent)
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("agentbox client: POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, readError(resp)
	}
	if ct := resp.Header.Get("Content-Type"); ct == "application/json" {
		// A daemon that does not stream answered with the whole result.
		var res api.Result
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
			return nil, fmt.Errorf("agentbox client: POST %s: decode answer: %w", path, err)
		}
		return &res, nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 256<<20) // a result event holds the whole result
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var ev api.StreamEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("agentbox client: POST %s: decode event: %w", path, err)
		}
		switch ev.Type {
		case api.EventResult:
			if ev.Result == nil {
				return nil, fmt.Errorf("agentbox client: POST %s: a result event without a result", path)
			}
			return ev.Result, nil
		case api.EventError:
			e := &Error{Status: statusForCode(ev.Error), Result: ev.Result, RequestID: resp.Header.Get("X-Request-Id")}
			if ev.Error != nil {
				e.Code, e.Message, e.Hint = ev.Error.Code, ev.Error.Message, ev.Error.Hint
			}
			return nil, e
		}
		if on != nil {
			on(ev)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("agentbox client: POST %s: reading the stream: %w", path, err)
	}
	return nil, fmt.Errorf("agentbox client: POST %s: the stream ended without a result", path)
}

// statusForCode is the HTTP status the daemon gives code (api/errors.go), for errors that arrive
// inside a stream, whose own status was 200.
func statusForCode(d *api.ErrorDetail) int {
	if d == nil {
		return http.StatusInternalServerError
	}
	switch d.Code {
	case api.CodeInvalidRequest:
		return http.StatusBadRequest
	case api.CodeUnauthorized:
		return http.StatusUnauthorized
	case api.CodePolicyViolation, api.CodeForbidden:
		return http.StatusForbidden
	case api.CodeNotFound:
		return http.StatusNotFound
	case api.CodeTimeout:
		return http.StatusRequestTimeout
	case api.CodeConflict:
		return http.StatusConflict
	case api.CodeMemoryLimit, api.CodeOutputLimit:
		return http.StatusUnprocessableEntity
	case api.CodeRuntimeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
