package bench

import (
	"math"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   []float64
		want float64
	}{
		{"empty", nil, 0},
		{"one", []float64{7}, 7},
		{"odd unsorted", []float64{5, 1, 3}, 3},
		{"even takes the mean of the middle two", []float64{4, 1, 3, 2}, 2.5},
		{"duplicates", []float64{2, 2, 2, 9}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := append([]float64(nil), tt.in...)
			if got := Median(tt.in); got != tt.want {
				t.Errorf("Median(%v) = %v, want %v", tt.in, got, tt.want)
			}
			for i := range in {
				if in[i] != tt.in[i] {
					t.Fatalf("Median modified its input: %v, was %v", tt.in, in)
				}
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(100 - i) // 100..1, unsorted
	}
	twoHundred := make([]float64, 200)
	for i := range twoHundred {
		twoHundred[i] = float64(i + 1)
	}
	tests := []struct {
		name string
		in   []float64
		p    float64
		want float64
	}{
		{"empty", nil, 99, 0},
		{"one", []float64{3}, 99, 3},
		{"p99 of 100 is the 99th value", hundred, 99, 99},
		{"p99 of 200 is the 198th value", twoHundred, 99, 198},
		{"p50 of 100 is the 50th value", hundred, 50, 50},
		{"p100 is the maximum", hundred, 100, 100},
		{"p99 of fewer than 100 is the maximum", []float64{1, 5, 2}, 99, 5},
		{"tiny p is the minimum", []float64{4, 1, 3}, 0.001, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Percentile(tt.in, tt.p); got != tt.want {
				t.Errorf("Percentile(p=%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func TestMinMean(t *testing.T) {
	t.Parallel()
	if got := Min([]float64{3, -1, 2}); got != -1 {
		t.Errorf("Min = %v, want -1", got)
	}
	if got := Min(nil); got != 0 {
		t.Errorf("Min(nil) = %v, want 0", got)
	}
	if got := Mean([]float64{1, 2, 6}); got != 3 {
		t.Errorf("Mean = %v, want 3", got)
	}
}

func TestGeomean(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   []float64
		want float64 // NaN means "want NaN"
	}{
		{"ratios cancel", []float64{2, 0.5}, 1},
		{"two and eight", []float64{2, 8}, 4},
		{"one value", []float64{12.8}, 12.8},
		{"three", []float64{1, 3, 9}, 3},
		{"empty", nil, math.NaN()},
		{"zero", []float64{1, 0}, math.NaN()},
		{"negative", []float64{4, -1}, math.NaN()},
		{"NaN in", []float64{4, math.NaN()}, math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Geomean(tt.in)
			if math.IsNaN(tt.want) {
				if !math.IsNaN(got) {
					t.Errorf("Geomean(%v) = %v, want NaN", tt.in, got)
				}
				return
			}
			if math.Abs(got-tt.want) > 1e-9*tt.want {
				t.Errorf("Geomean(%v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	lat := []time.Duration{10 * time.Millisecond, 30 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}
	s := Summarize(lat, 0)
	want := Summary{N: 4, Median: 25, P99: 40, Min: 10, PerSecond: 4 / 0.1}
	if math.Abs(s.PerSecond-want.PerSecond) > 1e-9 {
		t.Errorf("sequential runs/s = %v, want %v", s.PerSecond, want.PerSecond)
	}
	s.PerSecond = want.PerSecond
	if s != want {
		t.Errorf("Summarize = %+v, want %+v", s, want)
	}
	// Concurrent: four runs in 50 ms of wall time.
	if got := Summarize(lat, 50*time.Millisecond).PerSecond; math.Abs(got-80) > 1e-9 {
		t.Errorf("concurrent runs/s = %v, want 80", got)
	}
	if got := Summarize(nil, 0); got != (Summary{}) {
		t.Errorf("Summarize(nil) = %+v, want zero", got)
	}
}
