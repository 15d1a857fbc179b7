package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/mcphost"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// mcpClient is the HTTP client a remote MCP server is reached with: every connection is one the
// egress gateway serves as it serves a sandbox's, as session "mcp:NAME" under the server's
// profile, so the profile's policy, DLP, host-name checks and SSRF guard apply to the connection
// exactly as to a hosted server's own traffic. HTTPS is intercepted by the gateway, whose CA
// this client trusts (and only it). A refusal of the gateway is a policy_violation carrying the
// gateway's words.
func (g *gateway) mcpClient(ctx context.Context, s mcphost.Server) (*http.Client, error) {
	profile := s.RemoteProfile()
	if err := g.CheckProfile(profile); err != nil {
		return nil, sandbox.Errorf(sandbox.KindInvalidRequest, "remote MCP server %s: %v", s.Name, err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(g.CA())
	session := "mcp:" + s.Name
	tr := &http.Transport{
		// The gateway is a forward proxy: requests go to it in absolute form, HTTPS as CONNECT.
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "agentbox-egress"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			a, b := net.Pipe()
			if err := g.Serve(b, session, profile); err != nil {
				a.Close()
				return nil, err
			}
			return a, nil
		},
		OnProxyConnectResponse: func(_ context.Context, _ *url.URL, _ *http.Request, resp *http.Response) error {
			return egressRefusal(s, resp)
		},
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 4,
	}
	return &http.Client{Transport: refusalTransport{tr, s}}, nil
}

// refusalTransport turns the gateway's own refusal (a 403 marked X-Agentbox-Egress: refused)
// into a typed error.
type refusalTransport struct {
	next http.RoundTripper
	s    mcphost.Server
}

func (t refusalTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		var se *sandbox.Error
		if errors.As(err, &se) {
			return nil, se
		}
		return nil, err
	}
	if err := egressRefusal(t.s, resp); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

// egressRefusal is the gateway's refusal in resp as a policy_violation, or nil.
func egressRefusal(s mcphost.Server, resp *http.Response) error {
	if resp.Header.Get("X-Agentbox-Egress") != "refused" {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return sandbox.Errorf(sandbox.KindPolicyViolation, "remote MCP server %s: the egress gateway refused the connection to %s under profile %q: %s",
		s.Name, s.URL, s.RemoteProfile(), strings.TrimSpace(string(b))).
		WithHint("allow its host in the egress profile, or register it under another profile (agentbox mcp add %s --url URL --profile P)", s.Name)
}
