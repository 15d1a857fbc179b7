package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// DefaultURL is where `agentbox serve` listens unless told otherwise.
const DefaultURL = "http://127.0.0.1:8420"

// Client calls one agentbox daemon. It is safe for concurrent use.
type Client struct {
	base      *url.URL
	key       string
	hc        *http.Client
	userAgent string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the client send its requests through hc. Default: a client without an
// overall timeout, because a run may legitimately take as long as its own timeout; bound calls
// with their context instead.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithUserAgent sets the User-Agent header. Default "agentbox-go-client".
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a client of the daemon at baseURL (e.g. "http://127.0.0.1:8420") that
// authenticates with apiKey. An empty key is allowed: Health needs none, and other calls then
// fail with an *Error of code "unauthorized" whose hint says where the key is.
func New(baseURL, apiKey string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("agentbox client: URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("agentbox client: URL %q must be http:// or https:// with a host", baseURL)
	}
	c := &Client{base: u, key: apiKey, hc: &http.Client{}, userAgent: "agentbox-go-client"}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// FromEnv returns a client configured from the environment: AGENTBOX_URL (default
// DefaultURL) and the key from APIKeyFromEnv.
func FromEnv(opts ...Option) (*Client, error) {
	u := os.Getenv("AGENTBOX_URL")
	if u == "" {
		u = DefaultURL
	}
	return New(u, APIKeyFromEnv(), opts...)
}

// SystemDataDir is the data directory of a system install (scripts/install-system.sh: the
// agentbox service); its api_key is readable by the members of the group agentbox.
const SystemDataDir = "/var/lib/agentbox"

// systemDataDir is SystemDataDir; tests move it.
var systemDataDir = SystemDataDir

// APIKeyFromEnv returns the key the daemon expects, as the CLI and the Python SDK find it:
// AGENTBOX_API_KEY, else the api_key file in DefaultDataDir() (a daemon this user started), else
// the system install's SystemDataDir/api_key, else "".
func APIKeyFromEnv() string {
	if k := os.Getenv("AGENTBOX_API_KEY"); k != "" {
		return k
	}
	for _, dir := range []string{DefaultDataDir(), systemDataDir} {
		if dir == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, "api_key"))
		if k := strings.TrimSpace(string(b)); err == nil && k != "" {
			return k
		}
	}
	return ""
}

// DefaultDataDir is the daemon's default data directory: AGENTBOX_DATA_DIR if set, else the
// user's cache directory + "/agentbox" (the same rule as the daemon's configuration).
func DefaultDataDir() string {
	if d := os.Getenv("AGENTBOX_DATA_DIR"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "agentbox")
	}
	return ""
}

// URL returns the daemon's base URL.
func (c *Client) URL() string { return c.base.String() }

// do sends in (if not nil) as JSON and decodes a successful answer into out (if not nil).
// Statuses in ok count as success; anything else becomes an *Error.
func (c *Client) do(ctx context.Context, method, path string, in, out any, ok ...int) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("agentbox client: encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, body)
	if err != nil {
		return fmt.Errorf("agentbox client: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("agentbox client: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	for _, s := range ok {
		if resp.StatusCode == s {
			if out == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				return nil
			}
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				return fmt.Errorf("agentbox client: %s %s: decode answer: %w", method, path, err)
			}
			return nil
		}
	}
	return readError(resp)
}

// readError turns a failed answer into an *Error. Bodies that are not the API's error shape
// (a proxy's page, say) keep their status and a short excerpt.
func readError(resp *http.Response) error {
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	e := &Error{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	var body struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Hint    string `json:"hint"`
		} `json:"error"`
		Result json.RawMessage `json:"result"`
	}
	if err == nil && json.Unmarshal(b, &body) == nil && body.Error != nil && body.Error.Code != "" {
		e.Code, e.Message, e.Hint = body.Error.Code, body.Error.Message, body.Error.Hint
		if len(body.Result) > 0 && string(body.Result) != "null" {
			if err := json.Unmarshal(body.Result, &e.Result); err != nil {
				e.Result = nil
			}
		}
		return e
	}
	e.Code = codeForStatus(resp.StatusCode)
	excerpt := strings.TrimSpace(string(b))
	if len(excerpt) > 200 {
		excerpt = excerpt[:200] + "…"
	}
	e.Message = fmt.Sprintf("HTTP %s", resp.Status)
	if excerpt != "" {
		e.Message += ": " + excerpt
	}
	e.Hint = "the answer did not come from an agentbox daemon, or from an incompatible one; check the URL"
	return e
}

// codeForStatus guesses a code for answers without an error body.
func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusMethodNotAllowed:
		return "invalid_request"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusForbidden:
		return "policy_violation"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return "timeout"
	case http.StatusConflict:
		return "conflict"
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return "runtime_unavailable"
	}
	return "internal"
}
