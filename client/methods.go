package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/agentbox-dev/agentbox/api"
)

// Run runs code once in a fresh sandbox (POST /v1/run). A Python exception is not an error:
// the result's Error field carries it and ExitCode is non-zero.
func (c *Client) Run(ctx context.Context, req api.RunRequest) (*api.Result, error) {
	var res api.Result
	if err := c.do(ctx, http.MethodPost, "/v1/run", req, &res, http.StatusOK); err != nil {
		return nil, err
	}
	return &res, nil
}

// Route says which tier would run req and why, without running it (POST /v1/route).
func (c *Client) Route(ctx context.Context, req api.RunRequest) (*api.Routing, error) {
	var r api.Routing
	if err := c.do(ctx, http.MethodPost, "/v1/route", req, &r, http.StatusOK); err != nil {
		return nil, err
	}
	return &r, nil
}

// CreateSession starts a stateful session (POST /v1/sessions). Close it with CloseSession when
// done; the daemon also closes it after its idle timeout.
func (c *Client) CreateSession(ctx context.Context, req api.CreateSessionRequest) (*api.Session, error) {
	var s api.Session
	if err := c.do(ctx, http.MethodPost, "/v1/sessions", req, &s, http.StatusCreated); err != nil {
		return nil, err
	}
	return &s, nil
}

// RunInSession runs code in a session's interpreter (POST /v1/sessions/{id}/run). The first
// run after the session moved to another node of a cluster has Result.Notice set (kind
// api.NoticeSessionMoved: the node it left, the node it is on, the step it resumed from); a
// streamed run (RunInSessionStream) gets it as its first event (api.EventNotice) too.
func (c *Client) RunInSession(ctx context.Context, id string, req api.RunRequest) (*api.Result, error) {
	var res api.Result
	if err := c.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(id)+"/run", req, &res, http.StatusOK); err != nil {
		return nil, err
	}
	return &res, nil
}

// GetSession describes an open session (GET /v1/sessions/{id}).
func (c *Client) GetSession(ctx context.Context, id string) (*api.Session, error) {
	var s api.Session
	if err := c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(id), nil, &s, http.StatusOK); err != nil {
		return nil, err
	}
	return &s, nil
}

// CloseSession closes a session (DELETE /v1/sessions/{id}).
func (c *Client) CloseSession(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/sessions/"+url.PathEscape(id), nil, nil, http.StatusNoContent, http.StatusOK)
}

// CloseSessionKeep closes a session keeping its state and steps (DELETE
// /v1/sessions/{id}?keep=true): the daemon pauses it, writing a durable snapshot, and keeps it
// until the session's KeptUntil, to be resumed (a run, ResumeSession) or forked from a step.
func (c *Client) CloseSessionKeep(ctx context.Context, id string) (*api.Session, error) {
	var s api.Session
	if err := c.do(ctx, http.MethodDelete, "/v1/sessions/"+url.PathEscape(id)+"?keep=true", nil, &s, http.StatusOK); err != nil {
		return nil, err
	}
	return &s, nil
}

// ListSessions lists the open sessions, oldest first (GET /v1/sessions).
func (c *Client) ListSessions(ctx context.Context) ([]api.Session, error) {
	var l api.SessionList
	if err := c.do(ctx, http.MethodGet, "/v1/sessions", nil, &l, http.StatusOK); err != nil {
		return nil, err
	}
	return l.Sessions, nil
}

// Health reports the daemon's version and runtimes (GET /v1/health; no key needed). A daemon
// none of whose runtimes can take runs answers 503 with a health body: Health returns that body
// (Status "unavailable") and no error, so the caller sees why.
func (c *Client) Health(ctx context.Context) (*api.Health, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.String()+"/v1/health", nil)
	if err != nil {
		return nil, fmt.Errorf("agentbox client: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("agentbox client: GET /v1/health: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		return nil, readError(resp)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("agentbox client: GET /v1/health: %w", err)
	}
	var h api.Health
	if err := json.Unmarshal(b, &h); err != nil || h.Status == "" {
		return nil, &Error{Status: resp.StatusCode, Code: codeForStatus(resp.StatusCode),
			Message: fmt.Sprintf("HTTP %s: not a health report", resp.Status),
			Hint:    "the answer did not come from an agentbox daemon; check the URL"}
	}
	return &h, nil
}

// AuditQuery filters GET /v1/audit. Zero fields match everything.
type AuditQuery struct {
	Session, Kind, Decision string
	// Tenant and Agent match who asked; a tenant's key sees its own tenant's records only.
	Tenant, Agent string
	Since, Until  time.Time
	// Limit is how many of the most recent matching records to return (server default 100, at
	// most 1000).
	Limit int
}

// Audit reads the daemon's audit log (GET /v1/audit): the most recent records that match q,
// oldest first.
func (c *Client) Audit(ctx context.Context, q AuditQuery) ([]api.AuditRecord, error) {
	v := url.Values{}
	for name, val := range map[string]string{"session": q.Session, "kind": q.Kind, "decision": q.Decision,
		"tenant": q.Tenant, "agent": q.Agent} {
		if val != "" {
			v.Set(name, val)
		}
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.Format(time.RFC3339Nano))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	path := "/v1/audit"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var l api.AuditList
	if err := c.do(ctx, http.MethodGet, path, nil, &l, http.StatusOK); err != nil {
		return nil, err
	}
	out := make([]api.AuditRecord, 0, len(l.Records))
	for _, raw := range l.Records {
		var r api.AuditRecord
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("agentbox client: GET /v1/audit: record: %w", err)
		}
		out = append(out, r)
	}
	return out, nil
}
