package dlp

import (
	"bytes"
	"context"
	"net/http"
	"testing"
)

// BenchmarkScanRequestJSON10MB measures ScanRequest on a 10 MB JSON body (BenchBody). The
// target is over 200 MB/s; -benchtime 20x gives a stable figure.
func BenchmarkScanRequestJSON10MB(b *testing.B) {
	s, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	body := BenchBody(10_000_000)
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
