package client

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentbox-dev/agentbox/api"
)

// CreateVolume makes a named volume of quota bytes (0: the server's default) for the caller's
// tenant (POST /v1/volumes). Heavy sessions mount it with CreateSessionRequest.Volumes.
func (c *Client) CreateVolume(ctx context.Context, name string, quota int64) (*api.Volume, error) {
	var v api.Volume
	if err := c.do(ctx, http.MethodPost, "/v1/volumes", api.CreateVolumeRequest{Name: name, QuotaBytes: quota}, &v, http.StatusCreated); err != nil {
		return nil, err
	}
	return &v, nil
}

// Volumes lists the caller's tenant's volumes by name (GET /v1/volumes).
func (c *Client) Volumes(ctx context.Context) ([]api.Volume, error) {
	var l api.VolumeList
	if err := c.do(ctx, http.MethodGet, "/v1/volumes", nil, &l, http.StatusOK); err != nil {
		return nil, err
	}
	return l.Volumes, nil
}

// Volume describes one volume (GET /v1/volumes/{name}).
func (c *Client) Volume(ctx context.Context, name string) (*api.Volume, error) {
	var v api.Volume
	if err := c.do(ctx, http.MethodGet, "/v1/volumes/"+url.PathEscape(name), nil, &v, http.StatusOK); err != nil {
		return nil, err
	}
	return &v, nil
}

// DeleteVolume removes a volume no session mounts, with its files (DELETE /v1/volumes/{name}).
func (c *Client) DeleteVolume(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/volumes/"+url.PathEscape(name), nil, nil, http.StatusNoContent)
}

// WriteVolumeFile writes a file into a volume no session mounts (PUT
// /v1/volumes/{name}/files/{path}); past the quota it is an output_limit *Error and the file
// stays as it was.
func (c *Client) WriteVolumeFile(ctx context.Context, name, path string, content []byte) error {
	return c.putBytes(ctx, volumeFilePath(name, path), content)
}

// ReadVolumeFile reads a file of a volume without a session (GET /v1/volumes/{name}/files/{path}).
func (c *Client) ReadVolumeFile(ctx context.Context, name, path string) ([]byte, error) {
	return c.getBytes(ctx, volumeFilePath(name, path), path)
}

func volumeFilePath(name, path string) string {
	parts := strings.Split(strings.TrimLeft(path, "/"), "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return "/v1/volumes/" + url.PathEscape(name) + "/files/" + strings.Join(parts, "/")
}
