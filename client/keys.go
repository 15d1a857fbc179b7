package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/agentbox-dev/agentbox/api"
)

// The tenant keys (/v1/keys). Each call needs a key with the admin scope; the daemon's own key
// has it.

// ListKeys lists the tenant keys, in the order they were made, revoked and expired ones too
// (GET /v1/keys): ids, tenants, agents, scopes and times, never a key. A tenant other than ""
// keeps that tenant's.
func (c *Client) ListKeys(ctx context.Context, tenant string) ([]api.Key, error) {
	path := "/v1/keys"
	if tenant != "" {
		path += "?" + url.Values{"tenant": {tenant}}.Encode()
	}
	var l api.KeyList
	if err := c.do(ctx, http.MethodGet, path, nil, &l, http.StatusOK); err != nil {
		return nil, err
	}
	return l.Keys, nil
}

// CreateKey makes a tenant key (POST /v1/keys). The answer's Key is shown this once: the daemon
// keeps only its hash. A bad tenant name or scope is an *Error of code invalid_request saying
// which.
func (c *Client) CreateKey(ctx context.Context, req api.CreateKeyRequest) (*api.CreatedKey, error) {
	var k api.CreatedKey
	if err := c.do(ctx, http.MethodPost, "/v1/keys", req, &k, http.StatusCreated); err != nil {
		return nil, err
	}
	return &k, nil
}

// RotateKey revokes the key id and makes a new one with its tenant, agent, scopes and lifetime
// (POST /v1/keys/{id}/rotate). The new key is shown this once.
func (c *Client) RotateKey(ctx context.Context, id string) (*api.CreatedKey, error) {
	var k api.CreatedKey
	if err := c.do(ctx, http.MethodPost, "/v1/keys/"+url.PathEscape(id)+"/rotate", nil, &k, http.StatusCreated); err != nil {
		return nil, err
	}
	return &k, nil
}

// RevokeKey revokes the key id (DELETE /v1/keys/{id}): the daemon refuses it from its next
// request on. An unknown id is an *Error of code not_found.
func (c *Client) RevokeKey(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/keys/"+url.PathEscape(id), nil, nil, http.StatusNoContent)
}
