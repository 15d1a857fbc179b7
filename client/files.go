package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/agentbox-dev/agentbox/api"
)

// Session files (heavy sessions): paths are absolute inside the sandbox or relative to
// /home/user.

// WriteFile uploads content to path in a session (PUT /v1/sessions/{id}/files/content),
// creating parent directories and replacing an existing file.
func (c *Client) WriteFile(ctx context.Context, id, path string, content []byte) error {
	return c.putBytes(ctx, filesPath(id, "/content", path), content)
}

// ReadFile downloads path from a session (GET /v1/sessions/{id}/files/content).
func (c *Client) ReadFile(ctx context.Context, id, path string) ([]byte, error) {
	return c.getBytes(ctx, filesPath(id, "/content", path), path)
}

// putBytes sends content as a file's raw bytes to the endpoint at urlPath.
func (c *Client) putBytes(ctx context.Context, urlPath string, content []byte) error {
	resp, err := c.raw(ctx, http.MethodPut, urlPath, bytes.NewReader(content), "application/octet-stream")
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// getBytes reads a file's raw bytes from the endpoint at urlPath; file names it in an error.
func (c *Client) getBytes(ctx context.Context, urlPath, file string) ([]byte, error) {
	resp, err := c.raw(ctx, http.MethodGet, urlPath, nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("agentbox client: read %s: %w", file, err)
	}
	return b, nil
}

// ListFiles lists everything under dir in a session, recursively (GET /v1/sessions/{id}/files).
// An empty dir means /home/user.
func (c *Client) ListFiles(ctx context.Context, id, dir string) ([]api.FileInfo, error) {
	var l api.FileList
	if err := c.do(ctx, http.MethodGet, filesPath(id, "", dir), nil, &l, http.StatusOK); err != nil {
		return nil, err
	}
	return l.Files, nil
}

// RemoveFile removes path (a directory with everything under it) from a session
// (DELETE /v1/sessions/{id}/files).
func (c *Client) RemoveFile(ctx context.Context, id, path string) error {
	return c.do(ctx, http.MethodDelete, filesPath(id, "", path), nil, nil, http.StatusNoContent)
}

// Artifact downloads an artifact of a result (GET /v1/artifacts/{id}) and returns its content
// and media type.
func (c *Client) Artifact(ctx context.Context, id string) ([]byte, string, error) {
	resp, err := c.raw(ctx, http.MethodGet, "/v1/artifacts/"+url.PathEscape(id), nil, "")
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", fmt.Errorf("agentbox client: artifact %s: %w", id, err)
	}
	return b, resp.Header.Get("Content-Type"), nil
}

// Images lists the heavy tier's images and their packages (GET /v1/images).
func (c *Client) Images(ctx context.Context) ([]api.Image, error) {
	var l api.ImageList
	if err := c.do(ctx, http.MethodGet, "/v1/images", nil, &l, http.StatusOK); err != nil {
		return nil, err
	}
	return l.Images, nil
}

func filesPath(id, suffix, path string) string {
	p := "/v1/sessions/" + url.PathEscape(id) + "/files" + suffix
	if path != "" {
		p += "?path=" + url.QueryEscape(path)
	}
	return p
}

// raw sends a request whose body and answer are not JSON; an answer other than 2xx becomes an
// *Error. The caller closes the answer's body.
func (c *Client) raw(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, body)
	if err != nil {
		return nil, fmt.Errorf("agentbox client: %w", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("User-Agent", c.userAgent)
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("agentbox client: %s %s: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, readError(resp)
	}
	return resp, nil
}

// SetIntent makes name the session's current intent for ttl seconds (0: the intent's maximum)
// (PUT /v1/sessions/{id}/intent).
func (c *Client) SetIntent(ctx context.Context, id, name string, ttl float64) (*api.Intent, error) {
	var in api.Intent
	if err := c.do(ctx, http.MethodPut, "/v1/sessions/"+url.PathEscape(id)+"/intent", api.SetIntentRequest{Name: name, TTL: ttl}, &in, http.StatusOK); err != nil {
		return nil, err
	}
	return &in, nil
}

// ClearIntent ends the session's intent (DELETE /v1/sessions/{id}/intent).
func (c *Client) ClearIntent(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/sessions/"+url.PathEscape(id)+"/intent", nil, nil, http.StatusNoContent)
}

// Intent returns the session's current intent; Name is "" when it has none
// (GET /v1/sessions/{id}/intent).
func (c *Client) Intent(ctx context.Context, id string) (*api.Intent, error) {
	var in api.Intent
	if err := c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(id)+"/intent", nil, &in, http.StatusOK); err != nil {
		return nil, err
	}
	return &in, nil
}

// ReloadEgressPolicy makes the daemon read its egress profiles again (POST /v1/egress/reload) and
// returns their names. A profile file with an error leaves the old profiles in force; the error
// names the file and line.
func (c *Client) ReloadEgressPolicy(ctx context.Context) ([]string, error) {
	var r api.ReloadResult
	if err := c.do(ctx, http.MethodPost, "/v1/egress/reload", nil, &r, http.StatusOK); err != nil {
		return nil, err
	}
	return r.Profiles, nil
}
