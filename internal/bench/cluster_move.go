package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/s3/s3local"
)

// MoveRow is one tier's session move: from the SIGKILL of its node until its next run, sent to
// the gateway, answered from the other node (the gateway finds the node gone, asks the other to
// adopt the session, which restores it), beside the same run through the gateway on the live
// session before the kill.
type MoveRow struct {
	Tier string `json:"tier"`
	// Path is "gateway" (the client's run sent to the gateway) or "node" (the adopt call and the
	// run sent to the adopting node directly: the node's part alone).
	Path          string  `json:"path"`
	MoveP50MS     float64 `json:"move_p50_ms"`
	MoveMaxMS     float64 `json:"move_max_ms"`
	BaselineP50MS float64 `json:"baseline_p50_ms"`
	Moved         int     `json:"moved"`
	Failed        int     `json:"failed"`
	// FirstTryFailed counts moves whose first run after the kill the gateway answered with
	// runtime_unavailable (the move time then includes the client's retries, 50 ms apart).
	FirstTryFailed int `json:"first_try_failed"`
	// Store is what the nodes share: "dir" (a directory) or "s3" (a bucket of SeaweedFS on
	// loopback).
	Store string `json:"store"`
	// ThinkMS is how long after the last durable step the node was killed.
	ThinkMS float64 `json:"think_ms,omitempty"`
}

// sandboxUnavailable says the gateway answered runtime_unavailable.
func sandboxUnavailable(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Code == api.CodeRuntimeUnavailable
}

// DurableRow is the cost of heavy steps made durable behind their results (pandas loaded, a
// 100,000 × 6 DataFrame).
type DurableRow struct {
	// DurableP50MS is how long after its result a step was durable; BytesP50 what its checkpoint
	// added to the store.
	DurableP50MS float64 `json:"durable_p50_ms"`
	DurableP99MS float64 `json:"durable_p99_ms"`
	BytesP50     float64 `json:"bytes_p50"`
	// Run latencies: back-to-back (no checkpoint between runs: the baseline), after 1.5 s of
	// think time (the checkpoint ran in it), and 300 ms after the previous result (while it runs).
	BackToBackP50MS float64 `json:"back_to_back_p50_ms"`
	BackToBackP99MS float64 `json:"back_to_back_p99_ms"`
	ThinkP50MS      float64 `json:"think_p50_ms"`
	ThinkP99MS      float64 `json:"think_p99_ms"`
	MidP50MS        float64 `json:"mid_checkpoint_p50_ms"`
	MidP99MS        float64 `json:"mid_checkpoint_p99_ms"`
	Steps           int     `json:"steps"`
}

// heavyVolume is the move rows' heavy session holding a volume read-write.
const heavyVolume = "heavy+volume"

const pandasSetup = "import pandas as pd, numpy as np\ndf = pd.DataFrame(np.random.rand(100000, 6))\nx = 0\n"

func msOf(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d) / float64(time.Millisecond)
	}
	return out
}

func sessionRun(ctx context.Context, c *client.Client, id, code string) (time.Duration, *api.Result, error) {
	start := time.Now()
	res, err := c.RunInSession(ctx, id, api.RunRequest{Code: code, Timeout: 120})
	took := time.Since(start)
	if err == nil && res.Error != nil {
		err = fmt.Errorf("%s: %s", res.Error.Name, res.Error.Value)
	}
	return took, res, err
}

// measureDurable times heavy steps in three patterns and reads each checkpoint's cost.
func measureDurable(ctx context.Context, n *clusterNode, steps int, progress func(string, ...any)) (*DurableRow, error) {
	progress("durable heavy steps: a session with pandas on node %s, %d steps per pattern", n.id, steps)
	s, err := n.c.CreateSession(ctx, api.CreateSessionRequest{Runtime: "heavy"})
	if err != nil {
		return nil, err
	}
	defer n.c.CloseSession(context.Background(), s.ID)
	if _, _, err := sessionRun(ctx, n.c, s.ID, pandasSetup); err != nil {
		return nil, err
	}
	if _, err := waitDurableHead(ctx, n.c, s.ID, 2*time.Minute); err != nil {
		return nil, err
	}
	row := &DurableRow{Steps: steps}
	step := "x += 1\ndf.iloc[x % len(df), 0] = x"
	var b2b, think, mid, durable []time.Duration
	var bytes []float64
	for range steps {
		d, _, err := sessionRun(ctx, n.c, s.ID, step)
		if err != nil {
			return nil, err
		}
		b2b = append(b2b, d)
	}
	for range steps {
		st, err := waitDurableHead(ctx, n.c, s.ID, 2*time.Minute)
		if err != nil {
			return nil, err
		}
		durable = append(durable, time.Duration(st.Snapshot.DurableMS*float64(time.Millisecond)))
		bytes = append(bytes, float64(st.Snapshot.Bytes))
		time.Sleep(1500 * time.Millisecond)
		d, _, err := sessionRun(ctx, n.c, s.ID, step)
		if err != nil {
			return nil, err
		}
		think = append(think, d)
	}
	for range steps {
		time.Sleep(300 * time.Millisecond)
		d, _, err := sessionRun(ctx, n.c, s.ID, step)
		if err != nil {
			return nil, err
		}
		mid = append(mid, d)
	}
	row.DurableP50MS, row.DurableP99MS = Median(msOf(durable)), Percentile(msOf(durable), 99)
	row.BytesP50 = Median(bytes)
	row.BackToBackP50MS, row.BackToBackP99MS = Median(msOf(b2b)), Percentile(msOf(b2b), 99)
	row.ThinkP50MS, row.ThinkP99MS = Median(msOf(think)), Percentile(msOf(think), 99)
	row.MidP50MS, row.MidP99MS = Median(msOf(mid)), Percentile(msOf(mid), 99)
	return row, nil
}

// movingSession is a session of the node about to be killed.
type movingSession struct {
	tier, id, check, want string
}

// measureMoves kills a node per round and times its sessions' move to the other node.
func measureMoves(ctx context.Context, cl *benchCluster, nodes []*clusterNode, gw *clusterNode, rounds int, think time.Duration, withHeavy bool) ([]MoveRow, int, error) {
	tiers := []string{api.RuntimeNano}
	if withHeavy {
		tiers = append(tiers, api.RuntimeHeavy, heavyVolume)
	}
	type sample struct{ move, base time.Duration }
	samples := map[string][]sample{}
	failedBy, firstFailed := map[string]int{}, map[string]int{}
	failed := 0
	for r := range rounds {
		if ctx.Err() != nil {
			break
		}
		owner, other := r%2, (r+1)%2
		on, to := nodes[owner], nodes[other]
		cl.progress("round %d: sessions on node %s, killing it, moving them to %s", r+1, on.id, to.id)
		var sessions []movingSession
		base := map[string]time.Duration{}
		volume := fmt.Sprintf("move-%d", r)
		for _, tier := range tiers {
			req := api.CreateSessionRequest{Runtime: tier}
			if tier == heavyVolume {
				// A heavy session holding a volume of 8 MiB of files: they travel in its checkpoint.
				if _, err := on.c.CreateVolume(ctx, volume, 64<<20); err != nil {
					return nil, failed, fmt.Errorf("round %d: volume: %w", r+1, err)
				}
				req = api.CreateSessionRequest{Runtime: api.RuntimeHeavy, Volumes: map[string]string{volume: "/mnt/v"}}
			}
			s, err := on.c.CreateSession(ctx, req)
			if err != nil {
				return nil, failed, fmt.Errorf("round %d: %s session: %w", r+1, tier, err)
			}
			setup := "x = 41\nopen('/home/user/m.txt', 'w').write('moved')\n"
			check, want := "x += 1\nprint(x, open('/home/user/m.txt').read())", "42 moved\n"
			switch tier {
			case api.RuntimeHeavy:
				setup = pandasSetup + setup
				check, want = "x += 1\nprint(x, len(df), open('/home/user/m.txt').read())", "42 100000 moved\n"
			case heavyVolume:
				setup = pandasSetup + setup + "import os\nfor i in range(8):\n    open(f'/mnt/v/{i}.bin', 'wb').write(os.urandom(1 << 20))\n"
				check, want = "x += 1\nprint(x, len(df), open('/home/user/m.txt').read(), sum(os.path.getsize(f'/mnt/v/{i}.bin') for i in range(8)))", "42 100000 moved 8388608\n"
			}
			if _, _, err := sessionRun(ctx, on.c, s.ID, setup); err != nil {
				return nil, failed, fmt.Errorf("round %d: %s: %w", r+1, tier, err)
			}
			// The baseline: the same run through the gateway on the live session (then undone,
			// for the moved one).
			d, _, err := sessionRun(ctx, gw.c, s.ID, check)
			if err != nil {
				return nil, failed, err
			}
			if _, _, err := sessionRun(ctx, gw.c, s.ID, "x -= 1"); err != nil {
				return nil, failed, err
			}
			base[tier] = d
			if _, err := waitDurableHead(ctx, on.c, s.ID, 2*time.Minute); err != nil {
				return nil, failed, err
			}
			sessions = append(sessions, movingSession{tier: tier, id: s.ID, check: check, want: want})
		}
		// Odd rounds go through the gateway, even ones to the node directly (its part alone).
		direct := r%2 == 1
		path := "gateway"
		if direct {
			path = "node"
		}
		key := func(tier string) string { return tier + " via " + path }
		if think > 0 {
			time.Sleep(think)
		}
		on.kill()
		killed := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, s := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var out *api.Result
				var err error
				if direct {
					// The node side alone: the adopt call the gateway would make, then the run.
					var res cluster.AdoptResult
					if err = cl.nodePost(ctx, to.url, "/v1/node/adopt", cluster.AdoptRequest{Session: s.id}, &res); err == nil {
						_, out, err = sessionRun(ctx, to.c, s.id, s.check)
					}
				} else {
					// A client that retries what the gateway answers runtime_unavailable (as the
					// SDKs' tasks do); how often the first try failed is counted.
					_, out, err = sessionRun(ctx, gw.c, s.id, s.check)
					for tries := 1; err != nil && sandboxUnavailable(err) && tries < 200; tries++ {
						if tries == 1 {
							mu.Lock()
							firstFailed[key(s.tier)]++
							mu.Unlock()
							cl.progress("round %d: %s: the first run after the kill: %v (retrying)", r+1, s.tier, err)
						}
						time.Sleep(50 * time.Millisecond)
						_, out, err = sessionRun(ctx, gw.c, s.id, s.check)
					}
				}
				moved := time.Since(killed)
				if out != nil {
					cl.progress("round %d: %s moved via %s in %v (the run itself: %.1f ms on the node)", r+1, s.tier, path, moved.Round(time.Millisecond), out.Timings.TotalMS)
				}
				if err == nil && (out.Stdout != s.want || out.Notice == nil || out.Notice.Kind != api.NoticeSessionMoved) {
					err = fmt.Errorf("after the move: %q (want %q), notice %+v", out.Stdout, s.want, out.Notice)
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed++
					failedBy[key(s.tier)]++
					cl.progress("round %d: %s session %s: %v", r+1, s.tier, s.id, err)
					return
				}
				samples[key(s.tier)] = append(samples[key(s.tier)], sample{moved, base[s.tier]})
			}()
		}
		wg.Wait()
		for _, s := range sessions {
			_ = to.c.CloseSession(ctx, s.id)
		}
		if withHeavy {
			_ = to.c.DeleteVolume(ctx, volume)
		}
		n, err := cl.start(ctx, on.id)
		if err != nil {
			return nil, failed, err
		}
		nodes[owner] = n
	}
	var rows []MoveRow
	for _, path := range []string{"gateway", "node"} {
		for _, tier := range tiers {
			k := tier + " via " + path
			var mv, bs []time.Duration
			for _, s := range samples[k] {
				mv, bs = append(mv, s.move), append(bs, s.base)
			}
			store := "dir"
			if cl.store != "" {
				store = "s3"
			}
			row := MoveRow{Tier: tier, Path: path, Moved: len(mv), Failed: failedBy[k], FirstTryFailed: firstFailed[k], Store: store,
				ThinkMS: float64(think) / float64(time.Millisecond)}
			if len(mv) > 0 {
				row.MoveP50MS, row.MoveMaxMS = Median(msOf(mv)), Percentile(msOf(mv), 100)
				row.BaselineP50MS = Median(msOf(bs))
			}
			if row.Moved+row.Failed > 0 {
				rows = append(rows, row)
			}
		}
	}
	return rows, failed, nil
}

func writeMoveReport(w io.Writer, r *ClusterResults) {
	fmt.Fprintf(w, "## Session move (node killed with SIGKILL → the session's next run answered by the other node)\n\n")
	fmt.Fprintf(w, "Via gateway: the run is sent to the gateway, which finds the node gone and has the other adopt the session. Via node: the adopt call and the run sent to the other node directly (the node's part alone). Rounds alternate.\n\n")
	fmt.Fprintf(w, "Store: dir = the nodes share a directory; s3 = a bucket of SeaweedFS on loopback (records by conditional writes, snapshots through each node's cache).\n\n")
	fmt.Fprintf(w, "Killed: how long after the sessions' last step became durable their node was killed (0: at once, the worst case).\n\n")
	fmt.Fprintf(w, "| store | killed | tier | via | moved | move p50 | move max | same run on the live session p50 | target | first try refused | failed |\n")
	fmt.Fprintf(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, m := range r.Move {
		killed := "at once"
		if m.ThinkMS > 0 {
			killed = "+" + fmtMS(m.ThinkMS) + " ms"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %d | %s ms | %s ms | %s ms | ≤ 2000 ms | %d | %d |\n", m.Store, killed, m.Tier, m.Path, m.Moved,
			fmtMS(m.MoveP50MS), fmtMS(m.MoveMaxMS), fmtMS(m.BaselineP50MS), m.FirstTryFailed, m.Failed)
	}
	fmt.Fprintf(w, "\nE2B resumes a paused sandbox in ~1 s; agent-sandbox has no move. The heavy session holds pandas and a 100,000 × 6 DataFrame; heavy+volume also holds a volume (read-write) with 8 MiB of files, which travel in its checkpoint.\n")
	if d := r.Durable; d != nil {
		fmt.Fprintf(w, "\n## Durable heavy steps (runsc checkpoint --leave-running of the latest step, pandas loaded)\n\n")
		fmt.Fprintf(w, "| figure | p50 | p99 |\n| --- | --- | --- |\n")
		fmt.Fprintf(w, "| step durable after its result | %s ms | %s ms |\n", fmtMS(d.DurableP50MS), fmtMS(d.DurableP99MS))
		fmt.Fprintf(w, "| run, back-to-back (no checkpoint between runs: baseline) | %s ms | %s ms |\n", fmtMS(d.BackToBackP50MS), fmtMS(d.BackToBackP99MS))
		fmt.Fprintf(w, "| run after 1.5 s of think time (the checkpoint ran in it) | %s ms | %s ms |\n", fmtMS(d.ThinkP50MS), fmtMS(d.ThinkP99MS))
		fmt.Fprintf(w, "| run 300 ms after the previous result (its checkpoint running: worst case) | %s ms | %s ms |\n", fmtMS(d.MidP50MS), fmtMS(d.MidP99MS))
		fmt.Fprintf(w, "\nBytes per durable checkpoint (p50): %.1f MB; each replaces the session's previous one. %d steps per pattern.\n",
			d.BytesP50/(1<<20), d.Steps)
	}
}

// measureMovesS3 runs the move rounds again with the nodes over a bucket of a SeaweedFS server
// (weed) started for them: the nodes are stopped and started again (same ids and ports, so the
// gateway's static discovery still finds them) with --store s3://BUCKET/cluster.
func measureMovesS3(ctx context.Context, cl *benchCluster, nodes []*clusterNode, gw *clusterNode, weed string, rounds int, think time.Duration, withHeavy bool) ([]MoveRow, int, error) {
	srv, err := s3local.Start(weed)
	if err != nil {
		return nil, 0, err
	}
	defer srv.Stop()
	c, err := srv.NewBucket(ctx, "")
	if err != nil {
		return nil, 0, err
	}
	cl.progress("S3-compatible store: SeaweedFS at %s, bucket %s", srv.Endpoint, c.Bucket())
	saved := *cl
	defer func() { cl.store, cl.env = saved.store, saved.env }()
	cl.store = "s3://" + c.Bucket() + "/cluster"
	cl.env = []string{"AGENTBOX_S3_ENDPOINT=" + srv.Endpoint, "AGENTBOX_S3_PATH_STYLE=1", "AGENTBOX_S3_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey, "AGENTBOX_S3_CREDENTIALS_FILE="}
	for i, n := range nodes {
		n.stop()
		if nodes[i], err = cl.start(ctx, n.id); err != nil {
			return nil, 0, err
		}
	}
	return measureMoves(ctx, cl, nodes, gw, rounds, think, withHeavy)
}
