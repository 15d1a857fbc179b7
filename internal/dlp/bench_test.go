package dlp

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"testing"
)

// BenchmarkScanRequestJSON10MB measures ScanRequest with the default policy on a 10 MB JSON
// body (BenchBody), with the two passes concurrent (the default) and sequential. The target is
// over 200 MB/s; -benchtime 20x gives a stable figure.
func BenchmarkScanRequestJSON10MB(b *testing.B) {
	body := BenchBody(10_000_000)
	for _, conc := range []int{2, 1} {
		b.Run("concurrency="+strconv.Itoa(conc), func(b *testing.B) {
			s, err := New(Config{Concurrency: conc})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v1/chat/completions", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				v, err := s.ScanRequest(req)
				if err != nil || v.Action != ActionBlock {
					b.Fatalf("verdict %v, %v", v.Action, err)
				}
			}
		})
	}
}

// BenchmarkScanBytes1MB measures ScanBytes (plain text: no JSON view, no paths) on 1 MB of
// BenchBody, sequentially: the cost per byte of the detectors alone.
func BenchmarkScanBytes1MB(b *testing.B) {
	s, err := New(Config{Concurrency: 1})
	if err != nil {
		b.Fatal(err)
	}
	body := BenchBody(1_000_000)
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.ScanBytes("body", body)
	}
}

func TestMeasureThroughput(t *testing.T) {
	res, err := MeasureThroughput(context.Background(), ThroughputOptions{BodyBytes: 1 << 20, Rounds: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Scan) != 3 || res.MBps(0.5) <= 0 || res.BaselineMBps(0.5) <= 0 || res.Findings == 0 {
		t.Fatalf("result %+v", res)
	}
	t.Logf("1 MB: %.0f MB/s (json.Valid %.0f MB/s), %d findings", res.MBps(0.5), res.BaselineMBps(0.5), res.Findings)
}
