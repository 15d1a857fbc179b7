package daemon

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/config"
)

// The E2B domain of the in-process cluster's nodes and gateway.
const clusterE2BDomain = "e2b.cluster.test"

// e2bCluster is an in-process cluster whose nodes serve E2B's SDKs for clusterE2BDomain (the
// template "toy" is the toy tier) and whose gateway forwards them.
func e2bCluster(t *testing.T) *testCluster {
	t.Helper()
	return startTestCluster(t, clusterOpts{
		node: func(_ *config.Config, o *FrontDoorOptions) {
			o.E2B = E2BOptions{Enabled: true, Domain: clusterE2BDomain, Templates: map[string]config.E2BTemplate{"toy": {Runtime: "toy"}}}
		},
		gateway: func(cfg *config.Config, _ *FrontDoorOptions) { cfg.E2B.Domain = clusterE2BDomain },
	}, "ea", "eb")
}

// e2bCall sends an E2B request through the gateway at host (api, or PORT-SANDBOX) under the
// domain, with headers, and returns the status, the answer's headers and body.
func e2bCall(t *testing.T, gw, host, method, path, body string, headers map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, gw+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host + "." + clusterE2BDomain
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s%s: %v", method, req.Host, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

type e2bSandbox struct {
	SandboxID          string `json:"sandboxID"`
	EnvdAccessToken    string `json:"envdAccessToken"`
	TrafficAccessToken string `json:"trafficAccessToken"`
}

// E2B's SDKs through the gateway, as they address it (api.DOMAIN, PORT-ID.DOMAIN): sandboxes are
// created on both nodes, code runs and files are read and written in each through the node its
// id names (by host name, and by the SDKs' sandbox headers), the list covers both nodes in pages,
// another tenant sees none of it, kill ends one, and a sandbox whose node is gone moves at its
// owner's next request.
func TestE2BThroughGateway(t *testing.T) {
	t.Parallel()
	c := e2bCluster(t)
	key, other := c.tenantKey(t, "acme"), c.tenantKey(t, "umbrella")
	api := map[string]string{"X-API-Key": key, "Content-Type": "application/json"}

	if st, _, b := e2bCall(t, c.gw, "api", "GET", "/health", "", nil); st != 200 || !strings.Contains(b, "ok") {
		t.Fatalf("control plane health: %d %s", st, b)
	}
	if st, _, b := e2bCall(t, c.gw, "api", "POST", "/v2/sandboxes", `{"templateID":"toy","allow_internet_access":false}`, map[string]string{"X-API-Key": "wrong"}); st != 401 || !strings.Contains(b, `"code":401`) {
		t.Fatalf("a bad key: %d %s, want 401 in E2B's format", st, b)
	}
	var boxes []e2bSandbox
	nodes := map[string]int{}
	for range 4 {
		st, _, b := e2bCall(t, c.gw, "api", "POST", "/v2/sandboxes", `{"templateID":"toy","allow_internet_access":false,"metadata":{"k":"v"}}`, api)
		var sb e2bSandbox
		if st != 201 || json.Unmarshal([]byte(b), &sb) != nil || sb.EnvdAccessToken == "" {
			t.Fatalf("create: %d %s", st, b)
		}
		sid, ok := sandboxSessionOf(sb.SandboxID)
		if !ok {
			t.Fatalf("sandbox %s names no node", sb.SandboxID)
		}
		node, _ := cluster.NodeOfSession(sid)
		nodes[node]++
		boxes = append(boxes, sb)
	}
	if nodes["ea"] == 0 || nodes["eb"] == 0 {
		t.Fatalf("4 sandboxes went to %v, want both nodes", nodes)
	}

	for i, sb := range boxes {
		tok := map[string]string{"X-Access-Token": sb.EnvdAccessToken, "Content-Type": "application/json"}
		// runCode: the code interpreter's execute, streamed.
		st, hdr, b := e2bCall(t, c.gw, "49999-"+sb.SandboxID, "POST", "/execute", `{"code":"cell `+sb.SandboxID+`"}`, tok)
		if sid, _ := sandboxSessionOf(sb.SandboxID); st != 200 || !strings.Contains(b, "cell "+sb.SandboxID) || !strings.Contains(b, "end_of_execution") ||
			hdr.Get("Agentbox-Node") != nodeOf(sid) {
			t.Fatalf("execute in %s: %d on %q %s", sb.SandboxID, st, hdr.Get("Agentbox-Node"), b)
		}
		// Files: envd's /files, written by host name, read back by the SDKs' headers.
		content := "content of " + sb.SandboxID
		if st, _, b := e2bCall(t, c.gw, "49983-"+sb.SandboxID, "POST", "/files?path=notes.txt", content,
			map[string]string{"X-Access-Token": sb.EnvdAccessToken, "Content-Type": "application/octet-stream"}); st != 200 {
			t.Fatalf("upload to %s: %d %s", sb.SandboxID, st, b)
		}
		hdrs := map[string]string{"X-Access-Token": sb.EnvdAccessToken, "E2b-Sandbox-Id": sb.SandboxID, "E2b-Sandbox-Port": "49983"}
		if st, _, b := e2bCall(t, c.gw, "", "GET", "/files?path=notes.txt", "", hdrs); st != 200 || b != content {
			t.Fatalf("download from %s by headers: %d %q", sb.SandboxID, st, b)
		}
		// Another sandbox's token, and another tenant's key, do not reach it.
		if st, _, _ := e2bCall(t, c.gw, "49983-"+sb.SandboxID, "GET", "/files?path=notes.txt", "",
			map[string]string{"X-Access-Token": boxes[(i+1)%len(boxes)].EnvdAccessToken}); st != 401 {
			t.Errorf("another sandbox's token: %d, want 401", st)
		}
		if st, _, _ := e2bCall(t, c.gw, "49983-"+sb.SandboxID, "GET", "/files?path=notes.txt", "", map[string]string{"X-API-Key": other}); st != 502 {
			t.Errorf("another tenant's key: %d, want 502 (not running, as E2B answers)", st)
		}
		// getInfo, by the control plane, on the sandbox's node.
		if st, _, b := e2bCall(t, c.gw, "api", "GET", "/sandboxes/"+sb.SandboxID, "", api); st != 200 || !strings.Contains(b, `"k":"v"`) {
			t.Fatalf("getInfo %s: %d %s", sb.SandboxID, st, b)
		}
	}

	// The list: every node's, in pages of 3 with a cursor that works across nodes.
	type listed struct {
		SandboxID string `json:"sandboxID"`
	}
	var page1, page2 []listed
	st, hdr, b := e2bCall(t, c.gw, "api", "GET", "/v2/sandboxes?limit=3", "", api)
	if st != 200 || json.Unmarshal([]byte(b), &page1) != nil || len(page1) != 3 || hdr.Get("X-Next-Token") == "" || hdr.Get("X-Total-Running") != "4" {
		t.Fatalf("list page 1: %d %s %v", st, b, hdr)
	}
	st, hdr, b = e2bCall(t, c.gw, "api", "GET", "/v2/sandboxes?limit=3&nextToken="+hdr.Get("X-Next-Token"), "", api)
	if st != 200 || json.Unmarshal([]byte(b), &page2) != nil || len(page2) != 1 || hdr.Get("X-Next-Token") != "" {
		t.Fatalf("list page 2: %d %s %v", st, b, hdr)
	}
	seen := map[string]bool{}
	for _, s := range append(page1, page2...) {
		seen[s.SandboxID] = true
	}
	for _, sb := range boxes {
		if !seen[sb.SandboxID] {
			t.Errorf("the list's pages lack %s: %v", sb.SandboxID, seen)
		}
	}
	var theirs []listed
	if st, _, b := e2bCall(t, c.gw, "api", "GET", "/v2/sandboxes", "", map[string]string{"X-API-Key": other}); st != 200 || json.Unmarshal([]byte(b), &theirs) != nil || len(theirs) != 0 {
		t.Errorf("another tenant's list: %d %s", st, b)
	}
	if _, err := base64.RawURLEncoding.DecodeString(hdr.Get("X-Next-Token")); err != nil {
		t.Errorf("the cursor: %v", err)
	}

	// Kill: the sandbox ends on its node; the list no longer has it; its services are gone.
	dead := boxes[0]
	if st, _, b := e2bCall(t, c.gw, "api", "DELETE", "/sandboxes/"+dead.SandboxID, "", map[string]string{"X-API-Key": other}); st != 404 {
		t.Errorf("another tenant's kill: %d %s, want 404", st, b)
	}
	if st, _, b := e2bCall(t, c.gw, "api", "DELETE", "/sandboxes/"+dead.SandboxID, "", api); st != 204 {
		t.Fatalf("kill: %d %s", st, b)
	}
	var after []listed
	if st, _, b := e2bCall(t, c.gw, "api", "GET", "/sandboxes", "", api); st != 200 || json.Unmarshal([]byte(b), &after) != nil || len(after) != 3 {
		t.Errorf("the v1 list after a kill: %d %s", st, b)
	}
	if st, _, _ := e2bCall(t, c.gw, "49999-"+dead.SandboxID, "POST", "/execute", `{"code":"x"}`, map[string]string{"X-Access-Token": dead.EnvdAccessToken}); st != 502 {
		t.Errorf("execute in a killed sandbox: %d, want 502", st)
	}

	// A sandbox on a node that dies moves at its owner's next request (its access token says
	// whose it is); another tenant's request moves nothing.
	var fresh e2bSandbox
	for range 8 {
		st, _, b := e2bCall(t, c.gw, "api", "POST", "/v2/sandboxes", `{"templateID":"toy","allow_internet_access":false}`, api)
		if st != 201 || json.Unmarshal([]byte(b), &fresh) != nil {
			t.Fatalf("create: %d %s", st, b)
		}
		if sid, _ := sandboxSessionOf(fresh.SandboxID); nodeOf(sid) == "ea" {
			break
		}
	}
	sid, _ := sandboxSessionOf(fresh.SandboxID)
	if nodeOf(sid) != "ea" {
		t.Fatalf("no sandbox landed on ea in 8 tries")
	}
	c.nodes[0].kill()
	if st, _, b := e2bCall(t, c.gw, "49999-"+fresh.SandboxID, "POST", "/execute", `{"code":"x"}`, map[string]string{"X-API-Key": other}); st == 200 {
		t.Errorf("another tenant's execute on a dead node: %d %s", st, b)
	}
	if rec, err := c.shared.Get(t.Context(), sid); err != nil || rec.Owner != "ea" {
		t.Fatalf("after another tenant's request the sandbox is owned by %q (%v)", rec.Owner, err)
	}
	st, hdr, b = e2bCall(t, c.gw, "49999-"+fresh.SandboxID, "POST", "/execute", `{"code":"after the move"}`, map[string]string{"X-Access-Token": fresh.EnvdAccessToken})
	if st != 200 || !strings.Contains(b, "after the move") || hdr.Get("Agentbox-Node") != "eb" {
		t.Fatalf("the owner's execute after its node died: %d on %q %s", st, hdr.Get("Agentbox-Node"), b)
	}
}

// Through the gateway, a revoked key's sandbox access tokens stop working at once: the gateway
// checks them as the nodes do (401 in E2B's format), whichever node the sandbox is on.
func TestE2BRevokedKeyThroughGateway(t *testing.T) {
	t.Parallel()
	c := e2bCluster(t)
	key, rec := c.tenantKeyRecord(t, "acme")
	api := map[string]string{"X-API-Key": key, "Content-Type": "application/json"}
	var boxes []e2bSandbox
	for range 2 {
		st, _, b := e2bCall(t, c.gw, "api", "POST", "/v2/sandboxes", `{"templateID":"toy","allow_internet_access":false}`, api)
		var sb e2bSandbox
		if st != 201 || json.Unmarshal([]byte(b), &sb) != nil {
			t.Fatalf("create: %d %s", st, b)
		}
		boxes = append(boxes, sb)
	}
	exec := func(sb e2bSandbox) (int, string) {
		st, _, b := e2bCall(t, c.gw, "49999-"+sb.SandboxID, "POST", "/execute", `{"code":"x"}`,
			map[string]string{"X-Access-Token": sb.EnvdAccessToken, "Content-Type": "application/json"})
		return st, b
	}
	for _, sb := range boxes {
		if st, b := exec(sb); st != 200 {
			t.Fatalf("execute before the revocation: %d %s", st, b)
		}
	}
	if _, err := auth.RevokeKey(c.keysFile, rec.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, sb := range boxes {
		if st, b := exec(sb); st != 401 || !strings.Contains(b, `"code":401`) || !strings.Contains(b, "revoked") {
			t.Errorf("execute in %s with a revoked key's token: %d %s, want 401 saying it was revoked", sb.SandboxID, st, b)
		}
	}
}

// sandboxSessionOf is the session id of a sandbox id, and whether it names a node.
func sandboxSessionOf(sandboxID string) (string, bool) {
	rest, ok := strings.CutPrefix(sandboxID, "sb")
	if !ok {
		return "", false
	}
	_, ok = cluster.NodeOfSession("sb_" + rest)
	return "sb_" + rest, ok
}

func nodeOf(sessionID string) string {
	n, _ := cluster.NodeOfSession(sessionID)
	return n
}

// The gateway's own E2B listener (serve --role gateway --e2b-listen), for SDKs pointed at one
// address (E2B_API_URL and E2B_SANDBOX_URL) without a wildcard name: whatever its host name, a
// request is the control plane, or a sandbox's service when the SDKs' sandbox headers name one;
// both reach the node the sandbox is on.
func TestE2BGatewayOwnListener(t *testing.T) {
	t.Parallel()
	c := e2bCluster(t)
	if c.gwE2B == "" {
		t.Fatal("a gateway with an E2B domain has no E2B listener handler")
	}
	key := c.tenantKey(t, "acme")
	api := map[string]string{"X-API-Key": key, "Content-Type": "application/json"}
	if st, _, b := e2bCall(t, c.gwE2B, "", "GET", "/health", "", nil); st != 200 || !strings.Contains(b, "ok") {
		t.Fatalf("control plane health on the E2B listener: %d %s", st, b)
	}
	if st, _, b := e2bCall(t, c.gwE2B, "", "POST", "/v2/sandboxes", `{"templateID":"toy"}`, map[string]string{"X-API-Key": "wrong"}); st != 401 || !strings.Contains(b, `"code":401`) {
		t.Fatalf("a bad key: %d %s, want 401 in E2B's format", st, b)
	}
	nodes := map[string]bool{}
	for range 4 {
		st, _, b := e2bCall(t, c.gwE2B, "", "POST", "/v2/sandboxes", `{"templateID":"toy","allow_internet_access":false}`, api)
		var sb e2bSandbox
		if st != 201 || json.Unmarshal([]byte(b), &sb) != nil || sb.EnvdAccessToken == "" {
			t.Fatalf("create on the E2B listener: %d %s", st, b)
		}
		sid, _ := sandboxSessionOf(sb.SandboxID)
		nodes[nodeOf(sid)] = true
		hdrs := map[string]string{"X-Access-Token": sb.EnvdAccessToken, "E2b-Sandbox-Id": sb.SandboxID, "E2b-Sandbox-Port": "49999",
			"Content-Type": "application/json"}
		st, hdr, b := e2bCall(t, c.gwE2B, "", "POST", "/execute", `{"code":"cell `+sb.SandboxID+`"}`, hdrs)
		if st != 200 || !strings.Contains(b, "cell "+sb.SandboxID) || hdr.Get("Agentbox-Node") != nodeOf(sid) {
			t.Fatalf("execute by the sandbox headers: %d on %q %s", st, hdr.Get("Agentbox-Node"), b)
		}
		if st, _, b := e2bCall(t, c.gwE2B, "", "GET", "/sandboxes/"+sb.SandboxID, "", api); st != 200 || !strings.Contains(b, sb.SandboxID) {
			t.Fatalf("getInfo on the E2B listener: %d %s", st, b)
		}
	}
	if len(nodes) != 2 {
		t.Errorf("4 sandboxes created on the E2B listener went to %v, want both nodes", nodes)
	}
}
