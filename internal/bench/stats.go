package bench

import (
	"math"
	"sort"
	"time"
)

// Median returns the middle value of xs (the mean of the two middle values when len(xs) is
// even), or 0 for an empty slice. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := sorted(xs)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Percentile returns the nearest-rank p-th percentile of xs (0 < p <= 100): the smallest value
// such that at least p% of the values are at or below it. With 200 samples p99 is the third
// largest; with fewer than 100 samples it is the maximum. Nearest rank never invents a value
// that was not measured. It returns 0 for an empty slice.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := sorted(xs)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// Min returns the smallest value of xs, or 0 for an empty slice.
func Min(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	m := xs[0]
	for _, x := range xs[1:] {
		m = min(m, x)
	}
	return m
}

// Mean returns the arithmetic mean of xs, or 0 for an empty slice.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// Geomean returns the geometric mean of xs, the right average of ratios: a 2x and a 0.5x
// average to 1x. It returns NaN if xs is empty or any value is not positive.
func Geomean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var logs float64
	for _, x := range xs {
		if !(x > 0) {
			return math.NaN()
		}
		logs += math.Log(x)
	}
	return math.Exp(logs / float64(len(xs)))
}

func sorted(xs []float64) []float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s
}

// Summary is what the report shows of one latency sample.
type Summary struct {
	N int `json:"n"`
	// Median, P99 and Min are latencies in milliseconds.
	Median float64 `json:"median_ms"`
	P99    float64 `json:"p99_ms"`
	Min    float64 `json:"min_ms"`
	// PerSecond is the throughput: runs completed per second of wall-clock time over the whole
	// scenario. For a sequential scenario that is 1/mean latency; for concurrent clients it is
	// what the system sustained.
	PerSecond float64 `json:"runs_per_s"`
}

// Summarize computes a Summary from per-run latencies and the wall-clock time the runs took
// together (0: the runs were sequential, so the wall time is their sum).
func Summarize(lat []time.Duration, wall time.Duration) Summary {
	ms := make([]float64, len(lat))
	var sum time.Duration
	for i, d := range lat {
		ms[i] = float64(d) / float64(time.Millisecond)
		sum += d
	}
	if wall <= 0 {
		wall = sum
	}
	s := Summary{N: len(lat), Median: Median(ms), P99: Percentile(ms, 99), Min: Min(ms)}
	if wall > 0 {
		s.PerSecond = float64(len(lat)) / wall.Seconds()
	}
	return s
}
