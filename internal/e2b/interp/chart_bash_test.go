package interp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// figureChart runs code that draws one figure and returns the chart of its PNG result.
func figureChart(t *testing.T, url, code string) map[string]any {
	t.Helper()
	e := run(t, url, map[string]any{"code": "import matplotlib.pyplot as plt, numpy as np\n" + code + "\nplt.show()"})
	if e.err != nil {
		t.Fatalf("error %+v", e.err)
	}
	if len(e.results) != 1 || e.results[0].PNG == "" {
		t.Fatalf("results %+v", e.results)
	}
	if e.results[0].Chart == nil {
		t.Fatalf("the figure has no chart (if the image's guest agent predates charts, `agentbox setup` refreshes it)")
	}
	return e.results[0].Chart
}

// roundTrip gives v as JSON decodes it into a fixed shape.
func roundTrip(t *testing.T, v any, into any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}

type pointChart struct {
	Type, Title string
	XLabel      string   `json:"x_label"`
	YLabel      string   `json:"y_label"`
	XUnit       *string  `json:"x_unit"`
	XScale      string   `json:"x_scale"`
	XTicks      []any    `json:"x_ticks"`
	XTickLabels []string `json:"x_tick_labels"`
	Truncated   bool
	Elements    []struct {
		Label  string
		Points [][2]any
	}
}

// TestChart: a figure's PNG result carries its chart, as E2B's code interpreter returns it: the
// type and, per type, the data read from the axes; a huge figure's chart is bounded and says so.
func TestChart(t *testing.T) {
	srv, acme, sid := interpServer(t, "heavy")

	t.Run("Line", func(t *testing.T) {
		var c pointChart
		roundTrip(t, figureChart(t, srv.URL, "plt.plot([1, 2, 3], [4, 5, 6], label='up')\nplt.plot([1, 2, 3], [1, 1, 1])\n"+
			"plt.title('Growth')\nplt.xlabel('time (s)')\nplt.ylabel('v')"), &c)
		if c.Type != "line" || c.Title != "Growth" || c.XLabel != "time (s)" || c.XUnit == nil || *c.XUnit != "s" || c.XScale != "linear" ||
			len(c.XTicks) == 0 || len(c.XTicks) != len(c.XTickLabels) || len(c.Elements) != 2 {
			t.Fatalf("chart %+v", c)
		}
		if e := c.Elements[0]; e.Label != "up" || len(e.Points) != 3 || e.Points[2][0] != float64(3) || e.Points[2][1] != float64(6) {
			t.Fatalf("first line %+v", e)
		}
		if c.Elements[1].Label != "Line 1" || c.Truncated {
			t.Fatalf("second line %+v, truncated %v", c.Elements[1], c.Truncated)
		}
	})

	t.Run("Bar", func(t *testing.T) {
		var c struct {
			Type     string
			Elements []struct {
				Label, Group string
				Value        float64
			}
		}
		roundTrip(t, figureChart(t, srv.URL, "plt.bar(['a', 'b', 'c'], [3, 1, 2], label='sales')"), &c)
		if c.Type != "bar" || len(c.Elements) != 3 || c.Elements[0].Label != "a" || c.Elements[0].Value != 3 ||
			c.Elements[2].Label != "c" || c.Elements[2].Value != 2 || c.Elements[1].Group != "sales" {
			t.Fatalf("chart %+v", c)
		}
	})

	t.Run("Scatter", func(t *testing.T) {
		var c pointChart
		roundTrip(t, figureChart(t, srv.URL, "plt.scatter([1, 2], [3, 4], label='s')\nplt.scatter([5], [6])"), &c)
		if c.Type != "scatter" || len(c.Elements) != 2 || c.Elements[0].Label != "s" || len(c.Elements[0].Points) != 2 ||
			c.Elements[0].Points[1][1] != float64(4) || c.Elements[1].Points[0][0] != float64(5) {
			t.Fatalf("chart %+v", c)
		}
	})

	t.Run("Pie", func(t *testing.T) {
		var c struct {
			Type, Title string
			Elements    []struct {
				Label         string
				Angle, Radius float64
			}
		}
		roundTrip(t, figureChart(t, srv.URL, "plt.pie([1, 2, 3], labels=['x', 'y', 'z'])\nplt.title('Share')"), &c)
		if c.Type != "pie" || c.Title != "Share" || len(c.Elements) != 3 || c.Elements[1].Label != "y" || c.Elements[1].Angle != 120 ||
			c.Elements[2].Angle != 180 || c.Elements[0].Radius != 1 {
			t.Fatalf("chart %+v", c)
		}
	})

	t.Run("BoxAndWhisker", func(t *testing.T) {
		var c struct {
			Type     string
			Elements []struct {
				Label            string
				Min, Median, Max float64
				FirstQuartile    float64 `json:"first_quartile"`
				ThirdQuartile    float64 `json:"third_quartile"`
				Outliers         []float64
			}
		}
		roundTrip(t, figureChart(t, srv.URL, "plt.boxplot([[1, 2, 3, 4, 5, 20], [2, 3, 4, 5, 6]], labels=['A', 'B'])"), &c)
		if c.Type != "box_and_whisker" || len(c.Elements) != 2 || c.Elements[0].Label != "A" || c.Elements[0].Median != 3.5 ||
			c.Elements[0].Max != 5 || len(c.Elements[0].Outliers) != 1 || c.Elements[0].Outliers[0] != 20 || c.Elements[1].FirstQuartile != 3 {
			t.Fatalf("chart %+v", c)
		}
	})

	t.Run("TwoAxes", func(t *testing.T) {
		var c struct {
			Type, Title string
			Elements    []struct {
				Type     string
				Elements []any
			}
		}
		roundTrip(t, figureChart(t, srv.URL, "fig, (a, b) = plt.subplots(1, 2)\na.plot([1, 2], [3, 4])\nb.bar(['p', 'q'], [1, 2])\nfig.suptitle('Both')"), &c)
		if c.Type != "superchart" || c.Title != "Both" || len(c.Elements) != 2 || c.Elements[0].Type != "line" || c.Elements[1].Type != "bar" ||
			len(c.Elements[1].Elements) != 2 {
			t.Fatalf("chart %+v", c)
		}
	})

	t.Run("Unknown", func(t *testing.T) {
		if c := figureChart(t, srv.URL, "plt.imshow(np.eye(3))"); c["type"] != "unknown" {
			t.Fatalf("chart %+v", c)
		}
	})

	t.Run("Huge", func(t *testing.T) {
		start := time.Now()
		var c pointChart
		roundTrip(t, figureChart(t, srv.URL, "x = np.arange(1_000_000)\nplt.plot(x, np.sin(x))\nfor i in range(300):\n    plt.plot(x[:10] + i, x[:10])"), &c)
		total := 0
		for _, e := range c.Elements {
			total += len(e.Points)
		}
		b, _ := json.Marshal(c)
		// At most 100 elements, 1000 points a line (evenly sampled, the last kept), 10000 a chart.
		if c.Type != "line" || !c.Truncated || len(c.Elements) != 100 || len(c.Elements[0].Points) != 1000 ||
			c.Elements[0].Points[999][0] != float64(999_999) || total > 10000 || len(b) > 512<<10 {
			t.Fatalf("a huge figure: type %s, truncated %v, %d elements, %d points, %d bytes", c.Type, c.Truncated, len(c.Elements), total, len(b))
		}
		t.Logf("a huge figure's chart: %d elements, %d points, %d bytes, cell %v", len(c.Elements), total, len(b), time.Since(start))
	})

	t.Run("Artifact", func(t *testing.T) {
		// agentbox's own result has the chart on the figure's artifact.
		res, err := acme.RunInSession(context.Background(), sid, &sandbox.RunRequest{Code: "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()"})
		if err != nil || len(res.Artifacts) != 1 {
			t.Fatalf("%v %+v", err, res)
		}
		a := res.Artifacts[0]
		var c struct{ Type string }
		if a.Name != "figure-1.png" || a.MIME != "image/png" || json.Unmarshal(a.Chart, &c) != nil || c.Type != "line" {
			t.Fatalf("the figure: %+v", a)
		}
		// As the artifact store keeps it.
		stored, rc, err := acme.Artifact(a.ID)
		if err != nil {
			t.Fatal(err)
		}
		rc.Close()
		if string(stored.Chart) != string(a.Chart) {
			t.Fatalf("the stored chart %s", stored.Chart)
		}
	})
}

// TestBash: bash cells of a context share one shell (cd, variables, functions, exports); a cell
// that exits non-zero is the cell's error; a cell the client stops waiting for is interrupted and
// the next cell finds the shell as it was.
func TestBash(t *testing.T) {
	srv, _, _ := interpServer(t, "heavy")
	bash := func(code string) *execution {
		t.Helper()
		return run(t, srv.URL, map[string]any{"code": code, "language": "bash"})
	}
	if e := bash("cd /tmp; X=1; f() { echo \"f:$1\"; }; export Y=2"); e.err != nil {
		t.Fatalf("first cell: %+v", e.err)
	}
	e := bash("pwd; echo $X; f a; bash -c 'echo $Y'")
	if got := strings.Join(e.stdout, ""); got != "/tmp\n1\nf:a\n2\n" || e.err != nil {
		t.Fatalf("the next cell: %q %+v", got, e.err)
	}
	e = bash("echo out; echo err >&2; false")
	if strings.Join(e.stdout, "") != "out\n" || strings.Join(e.stderr, "") != "err\n" || e.err == nil || e.err.Value != "1" {
		t.Fatalf("a failing cell: %+v %+v", e, e.err)
	}
	e = run(t, srv.URL, map[string]any{"code": "echo $ONLY_HERE", "language": "bash", "env_vars": map[string]string{"ONLY_HERE": "yes"}})
	if strings.Join(e.stdout, "") != "yes\n" {
		t.Fatalf("env_vars: %+v", e)
	}
	if e := bash("echo ${ONLY_HERE:-unset}"); strings.Join(e.stdout, "") != "unset\n" {
		t.Fatalf("a cell's env_vars stay with it: %+v", e)
	}

	t.Run("Streams", func(t *testing.T) {
		e := bash("for i in 1 2 3; do echo $i; sleep 0.3; done")
		if strings.Join(e.stdout, "") != "1\n2\n3\n" || len(e.stdout) < 2 {
			t.Fatalf("stdout %q: not streamed as it came", e.stdout)
		}
	})

	t.Run("ClientTimeout", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		b, _ := json.Marshal(map[string]any{"code": "echo start; sleep 60; echo never", "language": "bash"})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/execute", strings.NewReader(string(b)))
		start := time.Now()
		if r, err := http.DefaultClient.Do(req); err == nil {
			_, err = r.Body.Read(make([]byte, 1<<16))
			for err == nil {
				_, err = r.Body.Read(make([]byte, 1<<16))
			}
			r.Body.Close()
		}
		e := bash("echo after $X; pwd")
		if got := strings.Join(e.stdout, ""); got != "after 1\n/tmp\n" || e.err != nil {
			t.Fatalf("the cell after a timeout: %q %+v", got, e.err)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("the interrupted cell held the session for %v", d)
		}
	})

	t.Run("IgnoredInterrupt", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		b, _ := json.Marshal(map[string]any{"code": "trap '' INT; sleep 60", "language": "bash"})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/execute", strings.NewReader(string(b)))
		if r, err := http.DefaultClient.Do(req); err == nil {
			for _, err = r.Body.Read(make([]byte, 1<<16)); err == nil; _, err = r.Body.Read(make([]byte, 1<<16)) {
			}
			r.Body.Close()
		}
		e := bash("echo ${X:-gone}")
		if strings.Join(e.stdout, "") != "gone\n" || !strings.Contains(strings.Join(e.stderr, ""), "new shell") {
			t.Fatalf("after a cell that ignored the interrupt: %+v", e)
		}
	})

	t.Run("Exit", func(t *testing.T) {
		if e := bash("exit 3"); e.err == nil || e.err.Value != "3" {
			t.Fatalf("exit 3: %+v", e.err)
		}
		if e := bash("echo again"); strings.Join(e.stdout, "") != "again\n" || e.err != nil {
			t.Fatalf("after exit: %+v", e)
		}
	})

	t.Run("Context", func(t *testing.T) {
		r, err := http.Post(srv.URL+"/contexts", "application/json", strings.NewReader(`{"language": "bash", "cwd": "/tmp/ctx"}`))
		if err != nil {
			t.Fatal(err)
		}
		var c struct{ ID, Language string }
		json.NewDecoder(r.Body).Decode(&c)
		r.Body.Close()
		if r.StatusCode != 200 || c.Language != "bash" {
			t.Fatalf("create: %d %+v", r.StatusCode, c)
		}
		if e := run(t, srv.URL, map[string]any{"code": "pwd; Z=9", "context_id": c.ID}); strings.Join(e.stdout, "") != "/tmp/ctx\n" {
			t.Fatalf("in the context: %+v", e)
		}
		if e := run(t, srv.URL, map[string]any{"code": "echo ${Z:-none} $((1+1))", "context_id": c.ID}); strings.Join(e.stdout, "") != "9 2\n" {
			t.Fatalf("the context's state: %+v", e)
		}
		if e := bash("echo ${Z:-none}"); strings.Join(e.stdout, "") != "none\n" {
			t.Fatalf("the default bash context sees the other's: %+v", e)
		}
		if r, err := http.Post(srv.URL+"/contexts/"+c.ID+"/restart", "application/json", nil); err != nil || r.StatusCode != 200 {
			t.Fatalf("restart: %v %v", r, err)
		}
		e := run(t, srv.URL, map[string]any{"code": "echo ${Z:-none}; pwd", "context_id": c.ID})
		if strings.Join(e.stdout, "") != "none\n/tmp/ctx\n" || len(e.stderr) != 0 {
			t.Fatalf("after a restart: %+v", e)
		}
	})
}

// TestBashWithoutProcesses: a bash cell in a session whose tier cannot start processes (nano)
// keeps no shell; it ends at once with the tier's typed error as the cell's error, and the
// session's Python goes on.
func TestBashWithoutProcesses(t *testing.T) {
	srv, _, _ := interpServer(t, "nano")
	st, ex := execute(t, srv.URL, map[string]any{"code": "echo hi", "language": "bash"})
	if st != 200 && st < 400 {
		t.Fatalf("status %d", st)
	}
	if st == 200 && (ex.err == nil || strings.Contains(strings.Join(ex.stdout, ""), "hi")) {
		t.Fatalf("a bash cell in nano ran or failed silently: %+v", ex)
	}
	t.Logf("the bash cell: status %d, error %+v", st, ex.err)
	if r := run(t, srv.URL, map[string]any{"code": "print(1 + 1)"}); r.err != nil || strings.Join(r.stdout, "") != "2\n" {
		t.Fatalf("python after the bash cell: %+v", r)
	}
}
