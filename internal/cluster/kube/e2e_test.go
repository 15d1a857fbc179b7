package kube_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/cluster/kube"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// localCluster is a running scripts/cluster/kube-local.sh cluster with deploy/k8s applied.
type localCluster struct {
	t          *testing.T
	k          testenv.Kube
	dir        string // the cluster's state directory
	kubeconfig string
	apiKey     string
}

// kubectl runs kubectl against the cluster, bounded, and returns its output or fails the test.
func (c *localCluster) kubectl(timeout time.Duration, args ...string) string {
	c.t.Helper()
	out, err := c.tryKubectl(timeout, args...)
	if err != nil {
		c.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (c *localCluster) tryKubectl(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.k.Kubectl(), append([]string{"--kubeconfig", c.kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// dump logs what the cluster holds, for a failing test.
func (c *localCluster) dump() {
	out, _ := c.tryKubectl(20*time.Second, "get", "pods,endpointslices", "-A", "-o", "wide")
	c.t.Logf("cluster state:\n%s", out)
	for _, sel := range []string{"app.kubernetes.io/component=node", "app.kubernetes.io/component=gateway"} {
		out, _ := c.tryKubectl(20*time.Second, "-n", "agentbox", "logs", "-l", sel, "--tail", "40", "--prefix")
		c.t.Logf("logs of %s:\n%s", sel, out)
	}
}

func run(t *testing.T, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(name), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

func randomHex(t *testing.T) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// startCluster builds the image, starts the local cluster and applies deploy/k8s with a test
// overlay: the runtimes' artifacts from this machine's data directory, a shared directory of the
// test's, a second node DaemonSet (one Kubernetes node runs one pod of a DaemonSet; two node pods
// need two), and the API server's real address for the gateway (the local cluster has no
// kube-proxy, so the kubernetes Service's IP does not route).
func startCluster(t *testing.T) *localCluster {
	k := testenv.RequireKube(t)
	for _, tool := range []string{"ip", "openssl", "gcc", "etcd", "runc"} {
		testenv.RequireTool(t, tool)
	}
	dataDir := config.DefaultDataDir()
	if _, err := os.Stat(heavy.LayoutFor(dataDir).Runsc(heavy.RunscVersion)); err != nil {
		testenv.Skip(t, "no runsc in "+dataDir+": run `agentbox setup`")
	}
	c := &localCluster{t: t, k: k, apiKey: randomHex(t)}

	bin := filepath.Join(t.TempDir(), "agentbox")
	run(t, 10*time.Minute, "go", "build", "-trimpath", "-o", bin, filepath.Join(k.Root, "cmd", "agentbox"))
	image := run(t, 5*time.Minute, k.Script("kube-image.sh"), bin)

	// Not t.TempDir: the kubelet's mounts live under it until `down` ends them.
	dir, err := os.MkdirTemp("", "agentbox-kube-test-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir, c.kubeconfig = dir, filepath.Join(dir, "kubeconfig")
	nodesBefore, _ := os.ReadDir(filepath.Join(dataDir, "nodes"))
	t.Cleanup(func() {
		if t.Failed() {
			c.dump()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, k.Script("kube-local.sh"), "down", dir).CombinedOutput()
		if err != nil {
			t.Errorf("kube-local.sh down: %v\n%s", err, out)
		}
		_ = os.RemoveAll(dir)
		// The node pods kept their own state under DATA_DIR/nodes/ID: remove what they added.
		had := map[string]bool{}
		for _, e := range nodesBefore {
			had[e.Name()] = true
		}
		after, _ := os.ReadDir(filepath.Join(dataDir, "nodes"))
		for _, e := range after {
			if !had[e.Name()] && strings.HasPrefix(e.Name(), "agentboxnode") {
				_ = os.RemoveAll(filepath.Join(dataDir, "nodes", e.Name()))
			}
		}
	})
	start := time.Now()
	run(t, 20*time.Minute, k.Script("kube-local.sh"), "up", dir) // waits while another checkout's cluster runs
	t.Logf("cluster up in %v", time.Since(start).Round(100*time.Millisecond))
	run(t, 3*time.Minute, k.Script("kube-local.sh"), "import", image, dir)

	env := map[string]string{}
	for _, line := range strings.Split(run(t, time.Minute, k.Script("kube-local.sh"), "env", dir), "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok {
			env[k] = v
		}
	}
	shared := filepath.Join(dir, "shared")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(dir, "overlay")
	base, err := filepath.Rel(overlay, filepath.Join(k.Root, "deploy", "k8s")) // kustomize wants it relative
	if err != nil {
		t.Fatal(err)
	}
	ds, err := os.ReadFile(filepath.Join(k.Root, "deploy", "k8s", "nodes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(ds), "\n---\n")
	second := strings.ReplaceAll(docs[len(docs)-1], ": agentbox-node\n", ": agentbox-node-b\n")
	files := map[string]string{
		"kustomization.yaml": fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: agentbox
resources:
  - %s
  - second-node.yaml
patches:
  - path: node-volumes.yaml
    target: {kind: DaemonSet}
  - path: gateway-api.yaml
    target: {kind: Deployment, name: agentbox-gateway}
`, base),
		"second-node.yaml": second,
		"node-volumes.yaml": fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: any}
spec:
  template:
    spec:
      volumes:
        - name: data
          hostPath: {path: %q, type: Directory}
        - name: shared
          hostPath: {path: %q, type: Directory}
`, dataDir, shared),
		"gateway-api.yaml": fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: agentbox-gateway}
spec:
  template:
    spec:
      containers:
        - name: gateway
          env:
            - {name: KUBERNETES_SERVICE_HOST, value: %q}
            - {name: KUBERNETES_SERVICE_PORT, value: %q}
`, env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]),
	}
	if err := os.MkdirAll(overlay, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(overlay, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start = time.Now()
	c.kubectl(time.Minute, "apply", "-k", overlay)
	c.kubectl(time.Minute, "-n", "agentbox", "create", "secret", "generic", "agentbox-auth",
		"--from-literal=api-key="+c.apiKey, "--from-literal=cluster-token="+randomHex(t))
	for _, w := range []string{"daemonset/agentbox-node", "daemonset/agentbox-node-b", "deployment/agentbox-gateway"} {
		c.kubectl(4*time.Minute, "-n", "agentbox", "rollout", "status", w, "--timeout=180s")
	}
	t.Logf("deploy/k8s applied and ready in %v", time.Since(start).Round(100*time.Millisecond))
	t.Setenv("KUBECONFIG", c.kubeconfig)
	return c
}

// waitNodes waits until d lists want healthy nodes (and no unhealthy one), returning them.
func waitNodes(t *testing.T, d cluster.Discovery, want int, timeout time.Duration) []cluster.Node {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		nodes, err := d.Nodes(context.Background())
		healthy := 0
		for _, n := range nodes {
			if n.Healthy {
				healthy++
			}
		}
		if err == nil && healthy == want && len(nodes) == want {
			return nodes
		}
		if time.Now().After(deadline) {
			t.Fatalf("discovery: want %d healthy nodes, have %+v (err %v)", want, nodes, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestKubernetesCluster runs deploy/k8s on a real single-node Kubernetes (two agentbox node pods
// and the gateway) and checks what a user relies on: the gateway finds the nodes through their
// EndpointSlices, spreads 100 concurrent nano runs and 10 heavy sessions over both nodes and
// loses none, and when a node pod is killed its sessions move to the other node with their
// variables and files from their last step, and their next run works.
func TestKubernetesCluster(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	// Discovery through the real API server, as the gateway does it (there: its service account).
	kc, err := kube.Client()
	if err != nil {
		t.Fatal(err)
	}
	d, err := kube.New(ctx, kc, kube.Spec{Namespace: "agentbox", Service: "agentbox-nodes"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	nodes := waitNodes(t, d, 2, time.Minute)
	t.Logf("nodes: %+v", nodes)

	// The cluster's gVisor RuntimeClass works: a pod of the agentbox image runs in runsc (through
	// the shim kube-build.sh patched) and exits.
	start := time.Now()
	c.kubectl(time.Minute, "-n", "agentbox", "run", "in-gvisor", "--image", "agentbox.local/agentbox:dev",
		"--image-pull-policy", "Never", "--restart", "Never",
		"--overrides", `{"spec": {"runtimeClassName": "runsc", "automountServiceAccountToken": false}}`,
		"--command", "--", "/bin/sh", "-c", `agentbox version; read -r v < /proc/version; echo "$v"`)
	c.kubectl(3*time.Minute, "-n", "agentbox", "wait", "pod/in-gvisor", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=150s")
	if out := c.kubectl(time.Minute, "-n", "agentbox", "logs", "in-gvisor"); !strings.Contains(out, "agentbox ") || !strings.Contains(out, "-gvisor") {
		t.Errorf("the runsc pod printed %q; want agentbox's version and gVisor's kernel in /proc/version", out)
	}
	t.Logf("a pod in the runsc RuntimeClass ran in %v", time.Since(start).Round(time.Millisecond))

	// The gateway, by its pod's address (no kube-proxy here for the Service's IP).
	gws, err := kube.New(ctx, kc, kube.Spec{Namespace: "agentbox", Service: "agentbox"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	gw := waitNodes(t, gws, 2, time.Minute)[0]
	cl, err := client.New(gw.Addr, c.apiKey)
	if err != nil {
		t.Fatal(err)
	}

	// 100 concurrent one-shot nano runs: every one answers, right.
	start = time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := cl.Run(ctx, api.RunRequest{Code: fmt.Sprintf("print(%d * %d)", i, i), Runtime: "nano", Timeout: 60})
			switch {
			case err != nil:
				errs <- fmt.Errorf("run %d: %w", i, err)
			case strings.TrimSpace(r.Stdout) != fmt.Sprint(i*i) || r.ExitCode != 0:
				errs <- fmt.Errorf("run %d: exit %d, stdout %q, stderr %q", i, r.ExitCode, r.Stdout, r.Stderr)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("100 concurrent nano runs through the gateway in %v", time.Since(start).Round(time.Millisecond))

	// 10 heavy sessions, created concurrently; each gets a variable and a file in a step.
	start = time.Now()
	type sess struct {
		id, node string
		n        int
	}
	sessions := make([]sess, 10)
	serrs := make(chan error, 10)
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := cl.CreateSession(ctx, api.CreateSessionRequest{Runtime: "heavy", Timeout: 120})
			if err != nil {
				serrs <- fmt.Errorf("session %d: %w", i, err)
				return
			}
			node, ok := cluster.NodeOfSession(s.ID)
			if !ok {
				serrs <- fmt.Errorf("session %d: id %q names no node", i, s.ID)
				return
			}
			sessions[i] = sess{id: s.ID, node: node, n: i}
			code := fmt.Sprintf("x = %d\nopen('note.txt', 'w').write('kept %d')\nprint(x * 2)", i, i)
			r, err := cl.RunInSession(ctx, s.ID, api.RunRequest{Code: code})
			if err != nil {
				serrs <- fmt.Errorf("session %d run: %w", i, err)
			} else if strings.TrimSpace(r.Stdout) != fmt.Sprint(i*2) {
				serrs <- fmt.Errorf("session %d run: stdout %q stderr %q", i, r.Stdout, r.Stderr)
			}
		}()
	}
	wg.Wait()
	close(serrs)
	for err := range serrs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	byNode := map[string][]sess{}
	for _, s := range sessions {
		byNode[s.node] = append(byNode[s.node], s)
	}
	t.Logf("10 heavy sessions with a step each in %v, by node: %d nodes", time.Since(start).Round(time.Millisecond), len(byNode))
	if len(byNode) != 2 {
		t.Fatalf("the 10 heavy sessions went to %d node(s), want both: %+v", len(byNode), sessions)
	}

	// A session moves from its latest durable step: wait until each one's step is durable (it
	// becomes so in the background, within a second or so on an idle machine).
	for _, s := range sessions {
		waitDurable(t, ctx, cl, s.id)
	}

	// Kill the node pod holding sessions[0]: its sessions move to the other node.
	victim := sessions[0].node
	victimAddr := ""
	for _, n := range nodes {
		if n.ID == victim {
			victimAddr = n.Addr
		}
	}
	pod := ""
	for _, line := range strings.Fields(c.kubectl(time.Minute, "-n", "agentbox", "get", "pods", "-l", "app.kubernetes.io/component=node", "-o", "name")) {
		name := strings.TrimPrefix(line, "pod/")
		if kube.NodeID(name) == victim {
			pod = name
		}
	}
	if pod == "" {
		t.Fatalf("no pod is node %s", victim)
	}
	killed := time.Now()
	c.kubectl(2*time.Minute, "-n", "agentbox", "delete", "pod", pod, "--grace-period=0", "--force", "--timeout=60s")
	// A forced delete returns at once while the kubelet stops the container: wait until the node
	// no longer answers, so the next request meets a dead node.
	waitGone(t, victimAddr, 2*time.Minute)
	t.Logf("node pod %s gone %v after the delete", pod, time.Since(killed).Round(time.Millisecond))
	killed = time.Now()
	retries := 0
	for _, s := range byNode[victim] {
		r, err := retryUnavailable(t, &retries, func() (*api.Result, error) {
			return cl.RunInSession(ctx, s.id, api.RunRequest{Code: "print(x, open('note.txt').read())"})
		})
		if err != nil {
			t.Errorf("session %s of the killed node: %v", s.id, err)
			continue
		}
		if want := fmt.Sprintf("%d kept %d", s.n, s.n); strings.TrimSpace(r.Stdout) != want {
			t.Errorf("session %s after the move: stdout %q, stderr %q; want %q", s.id, r.Stdout, r.Stderr, want)
		}
		if s == byNode[victim][0] {
			t.Logf("first moved session answering %v after its node pod was gone", time.Since(killed).Round(time.Millisecond))
		}
		if r.Notice == nil || r.Notice.Kind != api.NoticeSessionMoved || r.Notice.FromNode != victim {
			t.Errorf("session %s: notice %+v; want session_moved from %s", s.id, r.Notice, victim)
		}
		// And the next run works where it now is.
		r, err = retryUnavailable(t, &retries, func() (*api.Result, error) {
			return cl.RunInSession(ctx, s.id, api.RunRequest{Code: "x += 1\nprint(x)"})
		})
		if err != nil || strings.TrimSpace(r.Stdout) != fmt.Sprint(s.n+1) {
			t.Errorf("session %s, the run after the move: %v, %+v", s.id, err, r)
		}
		if b, err := cl.ReadFile(ctx, s.id, "note.txt"); err != nil || string(b) != fmt.Sprintf("kept %d", s.n) {
			t.Errorf("session %s: file after the move: %q, %v", s.id, b, err)
		}
	}
	if retries > 0 {
		t.Logf("%d request(s) answered runtime_unavailable (retry shortly) while the cluster recovered", retries)
	}
	// The other node's sessions are untouched.
	for _, s := range sessions {
		if s.node == victim {
			continue
		}
		r, err := cl.RunInSession(ctx, s.id, api.RunRequest{Code: "print(x)"})
		if err != nil || strings.TrimSpace(r.Stdout) != fmt.Sprint(s.n) || r.Notice != nil {
			t.Errorf("session %s on the surviving node: %v, %+v", s.id, err, r)
		}
	}
	for _, s := range sessions {
		_ = cl.CloseSession(ctx, s.id)
	}
}

// waitDurable waits until the head step of session id has a durable snapshot.
func waitDurable(t *testing.T, ctx context.Context, cl *client.Client, id string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		list, err := cl.Steps(ctx, id)
		if err != nil {
			t.Fatalf("steps of %s: %v", id, err)
		}
		state := ""
		for _, st := range list.Steps {
			if st.ID == list.Head {
				state = st.Snapshot.State
			}
		}
		if state == "durable" {
			return
		}
		if state == "dropped" || state == "none" || time.Now().After(deadline) {
			t.Fatalf("session %s: its head step %s is %q, not durable", id, list.Head, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitGone waits until nothing answers at the node's base URL.
func waitGone(t *testing.T, addr string, timeout time.Duration) {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := hc.Get(addr + "/v1/health")
		if err != nil {
			return
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("node %s still answers %v after its pod was deleted", addr, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// retryUnavailable calls f until it answers something other than runtime_unavailable, which the
// gateway answers (with "retry shortly") while no node can take a session yet, e.g. while the
// surviving node is busy restoring another one; at most a minute, counting the retries.
func retryUnavailable(t *testing.T, retries *int, f func() (*api.Result, error)) (*api.Result, error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r, err := f()
		var ae *client.Error
		if err == nil || !errors.As(err, &ae) || ae.Code != api.CodeRuntimeUnavailable || time.Now().After(deadline) {
			return r, err
		}
		*retries++
		time.Sleep(500 * time.Millisecond)
	}
}
