package nomad

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// localCluster is scripts/cluster/nomad-local.sh's cluster: a server and the clients c1 and c2,
// all on 127.0.0.1.
type localCluster struct {
	root  string // the module's root
	dir   string // the script's DIR
	nomad string // the binary
	addr  string // NOMAD_ADDR
	api   *api.Client
}

// startLocalCluster brings the cluster up with the script and down when the test ends.
func startLocalCluster(t *testing.T) *localCluster {
	t.Helper()
	c := &localCluster{root: moduleRoot(t), nomad: testenv.RequireNomad(t)}
	// Not t.TempDir: the agents keep files there until they stop, and `down` runs in a
	// Cleanup registered before TempDir's own.
	dir, err := os.MkdirTemp("", "agentbox-nomad-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(func() {
		start := time.Now()
		out, err := c.script("down")
		if err != nil {
			t.Errorf("nomad-local.sh down: %v\n%s", err, out)
		}
		t.Logf("cluster stopped in %s\n%s", time.Since(start).Round(time.Millisecond), out)
		// The agents' plugins (a task's logmon, ~100 MB each) name nothing of DIR but inherit an
		// agent's TMPDIR under it: `down` must have ended them all.
		for _, pid := range pidsWhereEnv(func(v []byte) bool { return bytes.HasPrefix(v, []byte("TMPDIR="+dir+"/")) }) {
			t.Errorf("left behind by nomad-local.sh down: pid %d (%s), killed", pid, cmdline(pid))
			syscall.Kill(pid, syscall.SIGKILL)
		}
		// Whatever still names the cluster's directory (a task's executor) goes too; twice, for
		// one that a dying client was starting.
		for i := range 2 {
			for _, pid := range pidsWithArg(dir + "/") {
				t.Logf("left behind after down: pid %d, killed", pid)
				syscall.Kill(pid, syscall.SIGKILL)
			}
			if i == 0 {
				time.Sleep(3 * time.Second)
			}
		}
		if t.Failed() {
			for _, a := range []string{"server", "c1", "c2"} {
				b, _ := os.ReadFile(filepath.Join(dir, a+".log"))
				t.Logf("--- %s.log:\n%s", a, tail(string(b), 30))
			}
		}
		os.RemoveAll(dir)
	})
	start := time.Now()
	out, err := c.script("up")
	if err != nil {
		t.Fatalf("nomad-local.sh up: %v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "NOMAD_ADDR="); ok {
			c.addr = strings.TrimSpace(v)
		}
	}
	if c.addr == "" {
		t.Fatalf("nomad-local.sh up printed no NOMAD_ADDR:\n%s", out)
	}
	t.Logf("cluster up in %s at %s (in %s)", time.Since(start).Round(time.Millisecond), c.addr, dir)
	conf := api.DefaultConfig()
	conf.Address = c.addr
	if c.api, err = api.NewClient(conf); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *localCluster) script(cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	x := exec.CommandContext(ctx, filepath.Join(c.root, "scripts/cluster/nomad-local.sh"), cmd, c.dir)
	x.Env = append(os.Environ(), "NOMAD="+c.nomad)
	var b bytes.Buffer
	x.Stdout, x.Stderr = &b, &b
	err := x.Run()
	return b.String(), err
}

// cli runs the nomad command against the cluster, as a person would.
func (c *localCluster) cli(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	x := exec.CommandContext(ctx, c.nomad, args...)
	x.Env = append(withoutEnv(os.Environ(), "AWS_CA_BUNDLE", "NOMAD_NAMESPACE", "NOMAD_TOKEN"), "NOMAD_ADDR="+c.addr)
	out, err := x.CombinedOutput()
	if err != nil {
		t.Fatalf("nomad %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// clientPID is the pid of client agent c1 or c2.
func (c *localCluster) clientPID(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.dir, name+".pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// nodeName is the name (c1, c2) of the Nomad client with the given node id.
func (c *localCluster) nodeName(t *testing.T, nodeID string) string {
	t.Helper()
	n, _, err := c.api.Nodes().Info(nodeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	return n.Name
}

// waitAllocsRunning waits until the job has want allocations running.
func (c *localCluster) waitAllocsRunning(t *testing.T, ns, job string, want int, limit time.Duration) {
	t.Helper()
	q := &api.QueryOptions{Namespace: ns}
	waitFor(t, limit, fmt.Sprintf("%d allocations of %s running", want, job), func() bool {
		allocs, _, err := c.api.Jobs().Allocations(job, false, q)
		if err != nil {
			return false
		}
		n := 0
		for _, a := range allocs {
			if a.ClientStatus == "running" {
				n++
			}
			if a.ClientStatus == "failed" {
				t.Fatalf("allocation %s of %s failed: %s", a.ID, job, c.allocEvents(a.ID, ns))
			}
		}
		return n == want
	})
}

// allocEvents is the task events of an allocation, for a failure's message.
func (c *localCluster) allocEvents(id, ns string) string {
	a, _, err := c.api.Allocations().Info(id, &api.QueryOptions{Namespace: ns})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for task, st := range a.TaskStates {
		for _, e := range st.Events {
			fmt.Fprintf(&b, "\n%s: %s %s", task, e.Type, e.DisplayMessage)
		}
	}
	return b.String()
}

// taskLogs is the end of the stderr of a task in each of the job's allocations, for a failure.
func (c *localCluster) taskLogs(ns, job, task string) string {
	allocs, _, err := c.api.Jobs().Allocations(job, true, &api.QueryOptions{Namespace: ns})
	if err != nil {
		return job + ": " + err.Error()
	}
	var b strings.Builder
	for _, a := range allocs {
		x := exec.Command(c.nomad, "alloc", "logs", "-namespace", ns, "-stderr", "-tail", "-n", "30", a.ID, task)
		x.Env = append(withoutEnv(os.Environ(), "AWS_CA_BUNDLE"), "NOMAD_ADDR="+c.addr)
		out, _ := x.CombinedOutput()
		fmt.Fprintf(&b, "--- %s/%s allocation %s on %s (%s):\n%s\n", job, task, a.ID[:8], a.NodeName, a.ClientStatus, out)
		b.WriteString(allocEvents(a))
	}
	// What Nomad's scheduler did about the job: a node that comes back late shows here as an
	// evaluation that waited (blocked, a wait_until) or placed nothing.
	if evals, _, err := c.api.Jobs().Evaluations(job, &api.QueryOptions{Namespace: ns}); err == nil {
		fmt.Fprintf(&b, "--- %s evaluations:\n", job)
		for _, e := range evals {
			fmt.Fprintf(&b, "  %s %s triggered by %s on node %.8s: %s %s (created %s, modified %s)", e.ID[:8], e.Type, e.TriggeredBy,
				e.NodeID, e.Status, e.StatusDescription, time.Unix(0, e.CreateTime).UTC().Format("15:04:05.000"),
				time.Unix(0, e.ModifyTime).UTC().Format("15:04:05.000"))
			if !e.WaitUntil.IsZero() {
				fmt.Fprintf(&b, " wait until %s", e.WaitUntil.UTC().Format("15:04:05.000"))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// allocEvents lists the task events of an allocation (received, restarting, started, killed,
// with their times), which say why a task came back when it did.
func allocEvents(a *api.AllocationListStub) string {
	var b strings.Builder
	names := make([]string, 0, len(a.TaskStates))
	for name := range a.TaskStates {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		st := a.TaskStates[name]
		fmt.Fprintf(&b, "  task %s (%s, %d restarts):\n", name, st.State, st.Restarts)
		for _, e := range st.Events {
			fmt.Fprintf(&b, "    %s %s: %s\n", time.Unix(0, e.Time).UTC().Format("15:04:05.000"), e.Type, e.DisplayMessage)
		}
	}
	return b.String()
}

// pidsWithEnv lists the processes whose environment holds kv (e.g. AGENTBOX_NODE_ID=...).
func pidsWithEnv(kv string) []int {
	return pidsWhereEnv(func(v []byte) bool { return string(v) == kv })
}

// pidsWhereEnv lists the processes with an environment entry that match says yes to.
func pidsWhereEnv(match func(kv []byte) bool) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, v := range bytes.Split(b, []byte{0}) {
			if match(v) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// pidsWithArg lists the processes whose command line holds s.
func pidsWithArg(s string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return string(bytes.ReplaceAll(bytes.TrimRight(b, "\x00"), []byte{0}, []byte{' '}))
}

// kill9 sends SIGKILL to pid and waits (at most 10 s) until it is gone.
func kill9(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, fmt.Sprintf("pid %d gone", pid), func() bool {
		return !alive(pid)
	})
}

// alive says whether pid runs (a zombie does not).
func alive(pid int) bool {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "State:"); ok {
			return !strings.Contains(v, "Z")
		}
	}
	return false
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}
