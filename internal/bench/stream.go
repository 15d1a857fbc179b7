package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
)

// StreamOptions are the settings of `agentbox bench stream`.
type StreamOptions struct {
	// N is the number of timed runs per tier and mode. Default 30.
	N int `json:"n"`
	// Heavy also measures the heavy tier ("on", "off", or "auto": when this machine runs it).
	Heavy   string    `json:"heavy"`
	DataDir string    `json:"data_dir"`
	JSON    bool      `json:"-"`
	Log     io.Writer `json:"-"`
}

// StreamResults are the figures of one run.
type StreamResults struct {
	Started time.Time   `json:"started"`
	Host    Host        `json:"host"`
	Load    string      `json:"load"`
	N       int         `json:"n"`
	Code    string      `json:"code"`
	Rows    []StreamRow `json:"rows"`
}

// StreamRow is one tier: the streamed run's first stdout chunk and its result, against the same
// code run without streaming, whose first byte of output comes with its result.
type StreamRow struct {
	Tier string `json:"tier"`
	// FirstChunk is from the request to the first stdout event of the streamed run.
	FirstChunkP50MS float64 `json:"first_chunk_p50_ms"`
	FirstChunkP99MS float64 `json:"first_chunk_p99_ms"`
	// StreamedTotal is from the request to the streamed run's result event.
	StreamedTotalP50MS float64 `json:"streamed_total_p50_ms"`
	StreamedTotalP99MS float64 `json:"streamed_total_p99_ms"`
	// Plain is the same code with the JSON answer: its first byte of output is its result.
	PlainP50MS float64 `json:"plain_p50_ms"`
	PlainP99MS float64 `json:"plain_p99_ms"`
	Failed     int     `json:"failed"`
}

// streamCode prints at once and then works for 300 ms: what a user watching the run waits for.
const streamCode = "import time\nprint('started', flush=True)\ntime.sleep(0.3)\nprint('done')\n"

const streamUsage = `usage: agentbox bench stream [flags]

Measures the time to the first streamed byte of a run (its first stdout chunk over NDJSON)
against the same run answered as one JSON result, whose first byte of output comes only with
the result, in the same daemon and the same rounds (alternating), on nano and heavy. The code
prints a line at once, then sleeps 300 ms and prints another.

flags:
`

func streamDefaults() StreamOptions {
	return StreamOptions{N: 30, Heavy: "auto", DataDir: config.DefaultDataDir(), Log: os.Stderr}
}

func mainStream(ctx context.Context, args []string, out io.Writer) error {
	d := streamDefaults()
	var o StreamOptions
	fs := newFlagSet("stream", streamUsage, out)
	fs.IntVar(&o.N, "n", d.N, "timed runs per tier and mode")
	fs.StringVar(&o.Heavy, "heavy", d.Heavy, "measure the heavy tier too: on, off or auto")
	fs.StringVar(&o.DataDir, "data-dir", d.DataDir, "the data directory with the runtimes' artifacts")
	fs.BoolVar(&o.JSON, "json", false, "write the results as JSON")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	res, err := RunStream(ctx, o)
	if err != nil {
		return err
	}
	failed := 0
	for _, r := range res.Rows {
		failed += r.Failed
	}
	return emit(ctx, out, "stream", o.JSON, res, writeStreamReport, failed)
}

// RunStream starts a daemon in this process and measures each tier.
func RunStream(ctx context.Context, o StreamOptions) (*StreamResults, error) {
	fillDefaults(&o, streamDefaults())
	progress := func(format string, args ...any) { fmt.Fprintf(o.Log, "bench stream: "+format+"\n", args...) }
	withHeavy := o.Heavy == "on"
	if o.Heavy == "auto" {
		l := heavy.LayoutFor(o.DataDir)
		if _, err := os.Stat(l.Runsc(heavy.RunscVersion)); err == nil {
			withHeavy = true
		}
	}
	t, _, _, err := startDaemon(ctx, o.DataDir, "stream-daemon.log", func(c *daemonConfig) {
		if withHeavy {
			c.Heavy.Enabled = heavy.On
			c.Heavy.StateDir = filepath.Join(o.DataDir, "bench", "heavy")
		} else {
			c.Heavy.Enabled = heavy.Off
		}
	}, progress)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	res := &StreamResults{Started: time.Now(), Host: thisHost(), N: o.N, Code: streamCode}
	tiers := []string{api.RuntimeNano}
	if withHeavy {
		tiers = append(tiers, api.RuntimeHeavy)
	}
	for _, tier := range tiers {
		progress("%s: %d streamed and %d plain runs, alternating", tier, o.N, o.N)
		row := StreamRow{Tier: tier}
		var first, total, plain []time.Duration
		req := api.RunRequest{Code: streamCode, Runtime: tier, Timeout: 30}
		for i := -2; i < o.N && ctx.Err() == nil; i++ { // two rounds of warm-up
			start := time.Now()
			var got time.Duration
			r, err := t.c.RunStream(ctx, req, func(ev api.StreamEvent) {
				if ev.Type == api.EventStdout && got == 0 {
					got = time.Since(start)
				}
			})
			streamed := time.Since(start)
			if err == nil && (got == 0 || r.Stdout != "started\ndone\n") {
				err = errors.New("no stdout chunk before the result")
			}
			start = time.Now()
			_, perr := t.c.Run(ctx, req)
			whole := time.Since(start)
			if i < 0 {
				continue
			}
			if err != nil || perr != nil {
				row.Failed++
				progress("%s: run failed: %v %v", tier, err, perr)
				continue
			}
			first, total, plain = append(first, got), append(total, streamed), append(plain, whole)
		}
		ms := func(ds []time.Duration) []float64 {
			out := make([]float64, len(ds))
			for i, d := range ds {
				out[i] = float64(d) / float64(time.Millisecond)
			}
			return out
		}
		row.FirstChunkP50MS, row.FirstChunkP99MS = Median(ms(first)), Percentile(ms(first), 99)
		row.StreamedTotalP50MS, row.StreamedTotalP99MS = Median(ms(total)), Percentile(ms(total), 99)
		row.PlainP50MS, row.PlainP99MS = Median(ms(plain)), Percentile(ms(plain), 99)
		res.Rows = append(res.Rows, row)
	}
	res.Load = loadAvg()
	return res, ctx.Err()
}

func writeStreamReport(w io.Writer, r *StreamResults) {
	fmt.Fprintf(w, "# agentbox bench stream\n\n%s, %d CPUs, %s; load %s; %d runs per tier and mode\n\n",
		r.Started.UTC().Format(time.RFC3339), r.Host.CPUs, r.Host.Kernel, r.Load, r.N)
	fmt.Fprintf(w, "Code: a line at once, then 300 ms of sleep and another line.\n\n")
	fmt.Fprintf(w, "| tier | first streamed byte p50 | p99 | streamed result p50 | p99 | non-streamed (first byte = result) p50 | p99 | failed |\n")
	fmt.Fprintf(w, "| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "| %s | %s ms | %s ms | %s ms | %s ms | %s ms | %s ms | %d |\n", row.Tier,
			fmtMS(row.FirstChunkP50MS), fmtMS(row.FirstChunkP99MS), fmtMS(row.StreamedTotalP50MS), fmtMS(row.StreamedTotalP99MS),
			fmtMS(row.PlainP50MS), fmtMS(row.PlainP99MS), row.Failed)
	}
}
