package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestMCPFlags(t *testing.T) {
	t.Parallel()
	for args, want := range map[string][]string{
		"at least 1":           {"mcp", "-n", "0"},
		"unexpected arguments": {"mcp", "more"},
		"must not be negative": {"mcp", "-cold", "-1"},
		"not defined":          {"mcp", "-bogus"},
	} {
		var out bytes.Buffer
		if err := Main(context.Background(), want, &out); err == nil || !strings.Contains(err.Error(), args) {
			t.Errorf("Main(%q) = %v, want an error containing %q", want, err, args)
		}
	}
}

// The report: overhead against the stdio baseline (a negative one signed), the targets held
// against issue 15's goals.
func TestMCPReport(t *testing.T) {
	t.Parallel()
	r := &MCPReport{Started: time.Date(2026, 11, 26, 11, 0, 0, 0, time.UTC), Settings: MCPOptions{N: 10, Cold: 2},
		Machine: MCPMachine{Host: Host{CPUs: 2}, Node: "node v22", Image: "6144b8df1203195c"}}
	r.Rows = []Row{
		{Group: mgCall, Name: mcpRowStdio, Base: true, Stats: &Summary{N: 10, Median: 0.25, P99: 2}},
		{Group: mgCall, Name: mcpRowDirect, Stats: &Summary{N: 10, Median: 0.2, P99: 9}},
		{Group: mgCall, Name: mcpRowHosted, Stats: &Summary{N: 10, Median: 1.0, P99: 11}},
		{Group: mgCall, Name: mcpRowOwn, Error: "boom"},
		{Group: mgCold, Name: mcpRowCold, Stats: &Summary{N: 2, Median: 690, P99: 707}},
	}
	r.finish(mcpGoals)
	if r.Failed != 1 || len(r.Targets) != 2 || !r.Targets[0].Met || r.Targets[0].Value != 0.75 || !r.Targets[1].Met {
		t.Fatalf("failed %d, targets %+v", r.Failed, r.Targets)
	}
	var out bytes.Buffer
	writeMCPReport(&out, r)
	for _, want := range []string{"## agentbox bench mcp", "| +0.750 | 4.00x |", "| −0.050 |", "boom", "| add → first tools/list | 2 | 690 | 707 |", "cold start ≤ 1.5 s p50"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
