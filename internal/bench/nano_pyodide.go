package bench

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"time"
)

// pyodideDriver is the node script that loads Pyodide and runs what the bench asks; see its
// header for the protocol.
//
//go:embed pyodide_driver.cjs
var pyodideDriver []byte

// pyodideColdRuns is how many fresh node processes the cold Pyodide figures come from: each
// loadPyodide takes seconds, so a few suffice for a median.
const pyodideColdRuns = 3

// pyodideProc is one node process running the driver.
type pyodideProc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Scanner
	ready pyodideEvent
	// Start is the wall time from starting node to the driver's ready line.
	Start time.Duration
}

// pyodideEvent is one line from the driver.
type pyodideEvent struct {
	Event   string  `json:"event"`
	MS      float64 `json:"ms"`
	Stdout  string  `json:"stdout"`
	Stderr  string  `json:"stderr"`
	Error   string  `json:"error"`
	LoadMS  float64 `json:"load_ms"`
	Version string  `json:"version"`
	Python  string  `json:"python"`
}

// startPyodide starts argv (node on the driver, maybe behind nice) and waits for Pyodide to load.
func startPyodide(ctx context.Context, argv []string) (*pyodideProc, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = filepath.Dir(argv[len(argv)-1])
	var stderr tailBuffer
	cmd.Stderr = &stderr
	start := time.Now()
	in, out, err := startPiped(cmd)
	if err != nil {
		return nil, fmt.Errorf("start node: %w", err)
	}
	p := &pyodideProc{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	p.out.Buffer(make([]byte, 64<<10), 64<<20)
	ev, err := p.next()
	if err == nil && ev.Event != "ready" {
		err = fmt.Errorf("driver said %q (%s) instead of ready", ev.Event, ev.Error)
	}
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("pyodide: %w: %s", err, stderr.String())
	}
	p.Start = time.Since(start)
	p.ready = ev
	return p, nil
}

func (p *pyodideProc) next() (pyodideEvent, error) {
	if !p.out.Scan() {
		if err := p.out.Err(); err != nil {
			return pyodideEvent{}, err
		}
		return pyodideEvent{}, errors.New("node exited")
	}
	var ev pyodideEvent
	if err := json.Unmarshal(p.out.Bytes(), &ev); err != nil {
		return ev, fmt.Errorf("bad line from the driver %q: %w", truncate(p.out.Text(), 200), err)
	}
	return ev, nil
}

func (p *pyodideProc) send(cmd any) error {
	b, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	_, err = p.in.Write(append(b, '\n'))
	return err
}

// latency runs code n times in this process and returns the time of each runPython, as the driver
// measured it.
func (p *pyodideProc) latency(code string, n int, wantStdout string) ([]time.Duration, error) {
	if err := p.send(map[string]any{"op": "latency", "code": code, "n": n}); err != nil {
		return nil, err
	}
	var lat []time.Duration
	for {
		ev, err := p.next()
		if err != nil {
			return nil, err
		}
		switch ev.Event {
		case "iter":
			if ev.Stdout != wantStdout {
				return nil, fmt.Errorf("pyodide printed %q, want %q", ev.Stdout, wantStdout)
			}
			lat = append(lat, time.Duration(ev.MS*float64(time.Millisecond)))
		case "done":
			if len(lat) != n {
				return nil, fmt.Errorf("pyodide: %d of %d runs reported", len(lat), n)
			}
			return lat, nil
		default:
			return nil, fmt.Errorf("pyodide: %s %s", ev.Event, ev.Error)
		}
	}
}

// exec runs code once and returns its stdout.
func (p *pyodideProc) exec(code string) (string, error) {
	if err := p.send(map[string]any{"op": "exec", "code": code}); err != nil {
		return "", err
	}
	ev, err := p.next()
	switch {
	case err != nil:
		return "", err
	case ev.Event != "result":
		return "", fmt.Errorf("pyodide: %s %s", ev.Event, ev.Error)
	case ev.Error != "":
		return "", fmt.Errorf("pyodide: %s", truncate(ev.Error, 2000))
	}
	return ev.Stdout + "\n", nil
}

// Close ends the node process.
func (p *pyodideProc) Close() {
	p.in.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// pyodide measures Pyodide under node: the cold start in a few fresh node processes, then warm
// runPython latency in the last of them. The compute table starts a node process of its own on
// the driver (b.pyoDriver).
func (b *nanoBencher) pyodide(ctx context.Context) {
	const coldLoad, coldStart, warm = "Pyodide cold: loadPyodide()", "Pyodide cold: node start → ready", "Pyodide warm: runPython"
	failAll := func(err error) {
		b.fail(groupLatency, "", coldLoad, err)
		b.fail(groupLatency, "", warm, err)
		for _, s := range b.snippets {
			b.compute[s.Name].Errors[enginePyodide] = err.Error()
		}
	}
	dir := filepath.Join(b.opts.DataDir, "bench", "pyodide")
	driver, note, err := ensurePyodide(ctx, dir, b.opts.PyodideVersion, b.log)
	if note != "" {
		b.note("%s", note)
	}
	if err != nil {
		failAll(err)
		return
	}
	b.progress("pyodide: %d cold starts of node + loadPyodide", pyodideColdRuns)
	var loads, starts []time.Duration
	var p *pyodideProc
	for i := 0; i < pyodideColdRuns; i++ {
		if p != nil {
			p.Close()
		}
		if p, err = startPyodide(ctx, []string{"node", driver}); err != nil {
			failAll(err)
			return
		}
		loads = append(loads, time.Duration(p.ready.LoadMS*float64(time.Millisecond)))
		starts = append(starts, p.Start)
	}
	b.res.Machine.Pyodide = fmt.Sprintf("%s (Python %s)", p.ready.Version, p.ready.Python)
	b.add(groupLatency, "", coldLoad, fmt.Sprintf("%d fresh node processes, timed inside node", pyodideColdRuns), loads, 0, nil)
	b.add(groupLatency, "", coldStart, "wall time from starting node to Pyodide ready", starts, 0, nil)

	b.progress("pyodide: warm runPython, %d runs", b.opts.N)
	lat, err := p.latency(helloCode, warmup+b.opts.N, "hi")
	if err == nil {
		lat = lat[warmup:]
	}
	b.add(groupLatency, "", warm, "one node process, runPython timed inside node", lat, 0, err)

	p.Close()
	b.pyoDriver = driver
}
