package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestMainSubcommands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no subcommand", nil, "name a benchmark: cluster, e2b, egress, heavy, mcp, nano"},
		{"unknown lists the known ones", []string{"heavyy"}, `unknown benchmark "heavyy": the benchmarks are cluster, e2b, egress, heavy, mcp, nano`},
		{"cluster extra args", []string{"cluster", "more"}, "unexpected arguments"},
		{"cluster rounds zero", []string{"cluster", "-rounds", "0"}, "at least 1"},
		{"bad flag", []string{"nano", "-bogus"}, "flag provided but not defined"},
		{"bad pace", []string{"nano", "-pace", "soon"}, `-pace must be "health" or a duration`},
		{"cold url alone", []string{"nano", "-url", "", "-cold-url", "http://x"}, "-cold-url needs -url"},
		{"extra args", []string{"nano", "more"}, "unexpected arguments"},
		{"n zero", []string{"nano", "-n", "0"}, "at least 1"},
		{"heavy bad flag", []string{"heavy", "-bogus"}, "flag provided but not defined"},
		{"heavy extra args", []string{"heavy", "more"}, "unexpected arguments"},
		{"heavy refill zero", []string{"heavy", "-refill", "0"}, "at least 1"},
		{"idle sessions negative", []string{"nano", "-idle-sessions", "-1"}, "-idle-sessions must not be negative"},
		{"heavy creators zero", []string{"heavy", "-creators", "0"}, "at least 1"},
		{"heavy idle sessions negative", []string{"heavy", "-idle-sessions", "-2"}, "-idle-sessions must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			err := Main(context.Background(), tt.args, &out)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Main(%q) = %v, want an error containing %q", tt.args, err, tt.wantErr)
			}
		})
	}
}

func TestMainHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help"}, {"nano", "-h"}, {"heavy", "-h"}, {"mcp", "-h"}} {
		var out bytes.Buffer
		if err := Main(context.Background(), args, &out); err != nil {
			t.Errorf("Main(%q) = %v", args, err)
		}
		if !strings.Contains(out.String(), "usage: agentbox bench") {
			t.Errorf("Main(%q) printed %q", args, out.String())
		}
	}
}

func TestReport(t *testing.T) {
	t.Parallel()
	r := &NanoResults{
		Started:  time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC),
		Settings: NanoOptions{Concurrency: 4, Reps: 3},
		Machine:  NanoMachine{Host: Host{CPUs: 2}, Nano: "npm: -O0", LoadBefore: "1.00 2.00 3.00", LoadAfter: "4.00 5.00 6.00"},
		Density: []Density{{Name: rowDensity, Asked: 100, Opened: 100, Answered: 100, ProcessesBefore: 5, Processes: 5,
			BeforeMiB: 500, AfterMiB: 700, PerSession: 2}},
		Rows: []Row{
			{Group: groupLatency, Key: keyNative, Name: "native", Stats: &Summary{N: 200, Median: 10, P99: 20, Min: 9, PerSecond: 95}},
			{Group: groupLatency, Key: keyBwrap, Name: "bwrap", Stats: &Summary{N: 200, Median: 20, P99: 30, Min: 18, PerSecond: 48}},
			{Group: groupLatency, Name: "nano warm", Detail: "paced", Stats: &Summary{N: 200, Median: 5, P99: 8, Min: 4, PerSecond: 190}},
			{Group: groupLatency, Name: "nano cold", Error: "no daemon"},
			{Group: groupThroughput, Key: keyNative, Name: "native", Stats: &Summary{N: 200, Median: 40, P99: 90, Min: 20, PerSecond: 100}},
			{Group: groupThroughput, Name: "nano warm", Stats: &Summary{N: 200, Median: 40, P99: 90, Min: 20, PerSecond: 25}},
		},
		Compute: &NanoCompute{Method: "inside", Geomean: map[string]float64{engineNano: 12.8},
			Snippets: []NanoSnippet{{Name: "fib", Median: map[string]float64{engineNative: 0.05, engineNano: 0.64},
				Ratio: map[string]float64{engineNano: 12.8}, Errors: map[string]string{enginePyodide: "no node"}}}},
	}
	r.fillRatios()
	r.Targets = nanoTargets(r)
	var out bytes.Buffer
	writeNanoReport(&out, r)
	s := out.String()
	if i, j, k := strings.Index(s, "### Idle sessions"), strings.Index(s, "### Compute"), strings.Index(s, "### Targets"); i < 0 || !(i < j && j < k) {
		t.Errorf("want the idle sessions, compute and targets sections in that order:\n%s", s)
	}
	for _, want := range []string{
		"- load average (1, 5, 15 min): 1.00 2.00 3.00 at the start, 4.00 5.00 6.00 at the end",
		"| idle nano sessions | 100 | 100 | 5 → 5 | 500 | 700 | 2.00 | — | — |",
		"| ≤ 8 MiB PSS per idle nano session | idle nano sessions | 2.00 MiB | yes |",
		"| native | 200 | 10.0 | 20.0 | 9.00 | 95.0 | 1.00x | 0.50x |",
		"| nano warm [1] | 200 | 5.00 | 8.00 | 4.00 | 190 | 0.50x | 0.25x |",
		"| nano cold [2] | — |",
		"| nano warm | 200 | 25.0 | 40.0 | 90.0 | 20.0 | 0.25x | — |",
		"1. paced\n2. FAILED: no daemon\n",
		"| fib | 50.0 | 640 | — | 12.8x | — |",
		"| **geomean** | | | | **12.8x** | — |",
		"- fib on pyodide failed: no node",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}
