package nomad

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/freeport"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// helperEnv makes the test binary, started by Nomad as a task, serve the HTTP a check asks:
// 200 at /ok, 500 anywhere else.
const helperEnv = "AGENTBOX_NOMAD_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		serveHelper()
		return
	}
	os.Exit(m.Run())
}

func serveHelper() {
	addr := "127.0.0.1:" + os.Getenv("NOMAD_PORT_http")
	err := http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			fmt.Fprintln(w, "ok")
			return
		}
		http.Error(w, "failing on purpose", http.StatusInternalServerError)
	}))
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// devAgent starts `nomad agent -dev` (a server and a client in one, raw_exec enabled) on ports
// of its own and stops it when the test ends.
func devAgent(t *testing.T) *api.Client {
	t.Helper()
	bin := testenv.RequireNomad(t)
	dir := t.TempDir()
	ports := freePorts(t, 3)
	cfg := fmt.Sprintf(`bind_addr = "127.0.0.1"
ports {
  http = %d
  rpc  = %d
  serf = %d
}
disable_update_check = true
client {
  network_interface = "lo"
}
plugin "raw_exec" {
  config {
    enabled = true
  }
}
`, ports[0], ports[1], ports[2])
	if err := os.WriteFile(filepath.Join(dir, "agent.hcl"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "agent", "-dev", "-config", filepath.Join(dir, "agent.hcl"))
	// AWS_CA_BUNDLE makes the dev agent's AWS fingerprinter fail at start; dev mode keeps its
	// state under TMPDIR.
	cmd.Env = append(withoutEnv(os.Environ(), "AWS_CA_BUNDLE", "TMPDIR"), "TMPDIR="+dir)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "agent.log"))
			t.Logf("nomad agent log:\n%s", tail(string(b), 40))
		}
	})
	conf := api.DefaultConfig()
	conf.Address = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	c, err := api.NewClient(conf)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the dev agent's client ready with raw_exec", func() bool {
		nodes, _, err := c.Nodes().List(nil)
		if err != nil || len(nodes) == 0 || nodes[0].Status != "ready" {
			return false
		}
		d := nodes[0].Drivers["raw_exec"]
		return d != nil && d.Healthy
	})
	return c
}

func withoutEnv(env []string, names ...string) []string {
	var out []string
next:
	for _, kv := range env {
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// freePorts are loopback ports for the dev agent, below the kernel's ephemeral range (an
// outgoing connection could take one from port 0 before the agent binds it).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports, err := freeport.Loopback(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// helperJob is a service job of two groups running the test binary as an HTTP server under
// raw_exec, each registering a Nomad service with an HTTP check: "good" checks /ok, "bad" a path
// that fails. The good one carries the tag naming its agentbox node.
func helperJob(t *testing.T, id string) *api.Job {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	group := func(name, service, path string, tags []string) *api.TaskGroup {
		g := api.NewTaskGroup(name, 1)
		g.Networks = []*api.NetworkResource{{DynamicPorts: []api.Port{{Label: "http"}}}}
		g.Services = []*api.Service{{
			Name:      service,
			Provider:  "nomad",
			PortLabel: "http",
			Tags:      tags,
			Checks: []api.ServiceCheck{{
				Type: "http", Path: path, Interval: time.Second, Timeout: time.Second,
			}},
		}}
		task := api.NewTask("serve", "raw_exec").
			SetConfig("command", exe).
			Require(&api.Resources{CPU: ptr(50), MemoryMB: ptr(64)})
		task.Env = map[string]string{helperEnv: "1"}
		g.AddTask(task)
		return g
	}
	j := api.NewServiceJob(id, id, "global", 50)
	j.Datacenters = []string{"*"}
	j.AddTaskGroup(group("good", id+"-good", "/ok", []string{TagNodeID + "goodnode"}))
	j.AddTaskGroup(group("bad", id+"-bad", "/fail", nil))
	return j
}

// stopJob stops and purges a job and waits (at most 30 s) until its allocations have stopped.
func stopJob(t *testing.T, c *api.Client, id string) {
	c.Jobs().Deregister(id, true, nil)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		allocs, _, err := c.Allocations().List(nil)
		if err != nil {
			return
		}
		running := false
		for _, a := range allocs {
			if a.JobID == id && (a.ClientStatus == "running" || a.ClientStatus == "pending") {
				running = true
			}
		}
		if !running {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("allocations of %s still running 30 s after it was stopped", id)
}

func ptr[T any](v T) *T { return &v }

func TestDiscoveryAgainstNomad(t *testing.T) {
	c := devAgent(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	job := helperJob(t, "dtest")
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	// Before the agent stops (cleanups run last first): its tasks would outlive it.
	t.Cleanup(func() { stopJob(t, c, "dtest") })
	good, err := New(ctx, Options{Service: "dtest-good", Client: c, Interval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := New(ctx, Options{Service: "dtest-bad", Client: c, Interval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("passing checks make a healthy node named by its tag", func(t *testing.T) {
		waitFor(t, 60*time.Second, "dtest-good healthy", func() bool {
			n, err := good.Nodes(ctx)
			return err == nil && len(n) == 1 && n[0].Healthy
		})
		n, _ := good.Nodes(ctx)
		if n[0].ID != "goodnode" || n[0].Source != "nomad" || !strings.HasPrefix(n[0].Addr, "http://127.0.0.1:") {
			t.Fatalf("node = %+v, want id goodnode, source nomad, addr http://127.0.0.1:PORT", n[0])
		}
		resp, err := http.Get(n[0].Addr + "/ok")
		if err != nil {
			t.Fatalf("the node's address does not answer: %v", err)
		}
		resp.Body.Close()
	})
	t.Run("failing checks make an unhealthy node named by its Nomad node", func(t *testing.T) {
		nodes, _, err := c.Nodes().List(nil)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.ReplaceAll(nodes[0].ID, "-", "")
		// Registered, then its check fails.
		waitFor(t, 60*time.Second, "dtest-bad registered with a failed check", func() bool {
			n, err := bad.Nodes(ctx)
			if err != nil || len(n) != 1 {
				return false
			}
			allocs, _, err := c.Jobs().Allocations("dtest", false, nil)
			if err != nil {
				return false
			}
			for _, a := range allocs {
				if a.TaskGroup != "bad" {
					continue
				}
				checks, err := c.Allocations().Checks(a.ID, nil)
				if err != nil {
					return false
				}
				for _, ch := range checks {
					if ch.Status == "failure" {
						return true
					}
				}
			}
			return false
		})
		// The discovery reads the list again after the failure: wait for that read (a fixed
		// 300 ms did not always hold one on a loaded machine).
		var n []cluster.Node
		waitFor(t, 30*time.Second, "the discovery to read the failed check", func() bool {
			n, _ = bad.Nodes(ctx)
			return len(n) == 1 && !n[0].Healthy
		})
		if n[0].ID != want {
			t.Fatalf("nodes = %+v, want one unhealthy node with id %s", n, want)
		}
	})
	t.Run("a stopped job leaves no node", func(t *testing.T) {
		if _, _, err := c.Jobs().Deregister("dtest", true, nil); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, "dtest-good gone", func() bool {
			n, err := good.Nodes(ctx)
			return err == nil && len(n) == 0
		})
	})
}

func TestDiscoveryNomadUnreachable(t *testing.T) {
	ports := freePorts(t, 1)
	conf := api.DefaultConfig()
	conf.Address = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	c, err := api.NewClient(conf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, err := New(ctx, Options{Service: "agentbox-node", Client: c})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Nodes(ctx)
	if err == nil || !strings.Contains(err.Error(), "nomad service agentbox-node") {
		t.Fatalf("Nodes with Nomad down: err = %v, want one naming the service", err)
	}
}

func TestNewRefusesBadService(t *testing.T) {
	for _, s := range []string{"", "ns/svc", "a b"} {
		if _, err := New(context.Background(), Options{Service: s}); err == nil {
			t.Errorf("New(%q) = nil error", s)
		}
	}
}
