package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/agentbox-dev/agentbox/api"
)

func sessionPath(id string) string { return "/v1/sessions/" + url.PathEscape(id) }

func stepPath(id, step string) string { return sessionPath(id) + "/steps/" + url.PathEscape(step) }

// Steps lists a session's steps in the order they ran, and its head (GET
// /v1/sessions/{id}/steps).
func (c *Client) Steps(ctx context.Context, id string) (*api.StepList, error) {
	var l api.StepList
	if err := c.do(ctx, http.MethodGet, sessionPath(id)+"/steps", nil, &l, http.StatusOK); err != nil {
		return nil, err
	}
	return &l, nil
}

// Step describes one step of a session (GET /v1/sessions/{id}/steps/{step}).
func (c *Client) Step(ctx context.Context, id, step string) (*api.Step, error) {
	var st api.Step
	if err := c.do(ctx, http.MethodGet, stepPath(id, step), nil, &st, http.StatusOK); err != nil {
		return nil, err
	}
	return &st, nil
}

// InspectStep describes the variables and files a step held (GET .../steps/{step}/inspect).
func (c *Client) InspectStep(ctx context.Context, id, step string) (*api.StepInspection, error) {
	return c.InspectStepIn(ctx, id, step, "")
}

// InspectStepIn describes the variables one code context held at a step (a session's contexts,
// RunRequest.Context; "" the main one) and the session's files then (GET
// .../steps/{step}/inspect?context=).
func (c *Client) InspectStepIn(ctx context.Context, id, step, codeContext string) (*api.StepInspection, error) {
	p := stepPath(id, step) + "/inspect"
	if codeContext != "" {
		p += "?context=" + url.QueryEscape(codeContext)
	}
	var in api.StepInspection
	if err := c.do(ctx, http.MethodGet, p, nil, &in, http.StatusOK); err != nil {
		return nil, err
	}
	return &in, nil
}

// DiffSteps says what changed from base (empty: the step's parent) to step (GET
// .../steps/{step}/diff?base=).
func (c *Client) DiffSteps(ctx context.Context, id, step, base string) (*api.StepDiff, error) {
	return c.DiffStepsIn(ctx, id, step, base, "")
}

// DiffStepsIn is DiffSteps for one code context's variables ("" the main one; GET
// .../steps/{step}/diff?base=&context=).
func (c *Client) DiffStepsIn(ctx context.Context, id, step, base, codeContext string) (*api.StepDiff, error) {
	q := url.Values{}
	if base != "" {
		q.Set("base", base)
	}
	if codeContext != "" {
		q.Set("context", codeContext)
	}
	p := stepPath(id, step) + "/diff"
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var d api.StepDiff
	if err := c.do(ctx, http.MethodGet, p, nil, &d, http.StatusOK); err != nil {
		return nil, err
	}
	return &d, nil
}

// Rewind makes a session's state that of one of its steps (POST /v1/sessions/{id}/rewind).
func (c *Client) Rewind(ctx context.Context, id, step string) (*api.Session, error) {
	return c.sessionOp(ctx, sessionPath(id)+"/rewind", &api.StepRequest{Step: step}, http.StatusOK)
}

// Fork starts a new session from one of a session's steps (POST /v1/sessions/{id}/fork).
func (c *Client) Fork(ctx context.Context, id, step string) (*api.Session, error) {
	return c.sessionOp(ctx, sessionPath(id)+"/fork", &api.StepRequest{Step: step}, http.StatusCreated)
}

// Pause writes a session's state to disk and frees its sandbox (POST /v1/sessions/{id}/pause).
func (c *Client) Pause(ctx context.Context, id string) (*api.Session, error) {
	return c.sessionOp(ctx, sessionPath(id)+"/pause", nil, http.StatusOK)
}

// Resume brings a paused session back (POST /v1/sessions/{id}/resume).
func (c *Client) Resume(ctx context.Context, id string) (*api.Session, error) {
	return c.sessionOp(ctx, sessionPath(id)+"/resume", nil, http.StatusOK)
}

func (c *Client) sessionOp(ctx context.Context, path string, in any, ok int) (*api.Session, error) {
	var s api.Session
	if err := c.do(ctx, http.MethodPost, path, in, &s, ok); err != nil {
		return nil, err
	}
	return &s, nil
}

// ReadStepFile downloads a file as a session's step held it (GET
// /v1/sessions/{id}/steps/{step}/files/content).
func (c *Client) ReadStepFile(ctx context.Context, id, step, path string) ([]byte, error) {
	return c.getBytes(ctx, stepPath(id, step)+"/files/content?path="+url.QueryEscape(path), path)
}
