package dlp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"time"
)

// Throughput measurement, shared by `go test -bench` and the `agentbox bench egress` command.

// BenchBody returns a realistic JSON request body of about size bytes, the same for a given size:
// an LLM chat request whose messages carry prose and tool results (product records with UUIDs,
// prices, ISO timestamps, SKUs, log lines with IPs and durations), with a few findings every
// ~100 KB (an AWS key, a GitHub token, a card number in a JSON string and one as a JSON number,
// an e-mail address, a phone number). Prose mentions keys, tokens, access and passwords as
// normal text does, so keyword-gated rules have work to do.
func BenchBody(size int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	b.Grow(size + 4096)
	b.WriteString(`{"model":"gpt-4o","temperature":0.2,"max_tokens":4096,"stream":false,"messages":[`)
	b.WriteString(`{"role":"system","content":"You are a helpful shopping assistant. Use the tools to look up products and orders."}`)
	uuid := func() string {
		return fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", rng.Uint32(), rng.IntN(1<<16), rng.IntN(1<<12),
			0x8000|rng.IntN(1<<14), rng.Uint64()&(1<<48-1))
	}
	ts := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; b.Len() < size; i++ {
		ts = ts.Add(time.Duration(rng.IntN(90000)) * time.Millisecond)
		switch i % 3 {
		case 0: // the user's or assistant's prose
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			msg := map[string]any{"role": role, "content": benchProse(rng, 40+rng.IntN(120))}
			writeJSON(&b, msg)
		case 1: // a tool result: product records
			var items []map[string]any
			for k := 0; k < 5+rng.IntN(10); k++ {
				items = append(items, map[string]any{
					"id": uuid(), "sku": fmt.Sprintf("SKU-%05d-%s", rng.IntN(100000), []string{"BL", "RD", "XL"}[rng.IntN(3)]),
					"name":        benchProse(rng, 3+rng.IntN(4)),
					"price":       float64(rng.IntN(100000)) / 100,
					"stock":       rng.IntN(500),
					"updated_at":  ts.Format(time.RFC3339Nano),
					"created_ms":  ts.UnixMilli() - int64(rng.IntN(1e9)),
					"rating":      float64(rng.IntN(50)) / 10,
					"description": benchProse(rng, 20+rng.IntN(60)),
					"tags":        []string{"sale", "new", "eco"}[:1+rng.IntN(3)],
				})
			}
			writeJSON(&b, map[string]any{"role": "tool", "tool_call_id": "call_" + uuid()[:8],
				"content": map[string]any{"items": items, "page": i, "total": rng.IntN(5000)}})
		case 2: // a tool result: log lines, as one string
			var lines []string
			for k := 0; k < 10+rng.IntN(20); k++ {
				lines = append(lines, fmt.Sprintf("%s INFO req=%s ip=10.%d.%d.%d path=/api/v2/orders/%d status=%d dur=%dms user_agent=\"Mozilla/5.0 (X11; Linux x86_64)\"",
					ts.Format("2006-01-02 15:04:05.000"), uuid()[:13], rng.IntN(256), rng.IntN(256), rng.IntN(256),
					100000+rng.IntN(900000), []int{200, 200, 200, 201, 404, 500}[rng.IntN(6)], rng.IntN(2000)))
			}
			writeJSON(&b, map[string]any{"role": "tool", "tool_call_id": "call_" + uuid()[:8], "content": strings.Join(lines, "\n")})
		}
		if i%300 == 299 { // a few findings, ~every 100 KB
			writeJSON(&b, map[string]any{"role": "user", "content": "my deploy config: aws_access_key_id = AKIA5BQZ7XK4LMNR2TUV " +
				"and GITHUB_TOKEN=ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2, reach me at jane.doe@example.com or +1 415-555-2671",
				"payment": map[string]any{"card": "4111 1111 1111 1111", "card_number": json.Number("5500000000000004")}})
		}
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

func writeJSON(b *bytes.Buffer, v any) {
	if b.Bytes()[b.Len()-1] != '[' {
		b.WriteByte(',')
	}
	out, _ := json.Marshal(v)
	b.Write(out)
}

var benchWords = strings.Fields(`the a to of and in is it you that for on with as this be are at was
have not but from or by one all they we can there your what about which when if will out up
do their so into time has some them like than then now only its over also back after use two how
our first well way even new because any these give day most us order product price shipping
return refund size color blue red large small cotton shirt shoe delivery week address customer
support account login password reset token key access api request response server error retry
timeout cache latency model prompt tool call result data file upload image report chart table
value field number email phone card payment invoice total discount code secret auth session
cookie header query json text stream chunk batch queue worker job task user admin role permission
please thanks hello could would should might maybe sure great good bad fast slow cheap expensive`)

func benchProse(rng *rand.Rand, words int) string {
	var sb strings.Builder
	for i := 0; i < words; i++ {
		if i > 0 {
			if rng.IntN(12) == 0 {
				sb.WriteString(". ")
			} else if rng.IntN(15) == 0 {
				sb.WriteString(", ")
			} else {
				sb.WriteByte(' ')
			}
		}
		w := benchWords[rng.IntN(len(benchWords))]
		if rng.IntN(40) == 0 {
			w = fmt.Sprintf("%d", rng.IntN(10000))
		}
		sb.WriteString(w)
	}
	sb.WriteByte('.')
	return sb.String()
}

// ThroughputOptions configures MeasureThroughput.
type ThroughputOptions struct {
	// BodyBytes is the size of the JSON body. Default 10 MB (10,000,000 bytes), the size the
	// target (200 MB/s) is stated for.
	BodyBytes int
	// Rounds is the number of timed scans. Default 20.
	Rounds int
	// Config is the scanner's policy. Default the zero Config (DefaultActions).
	Config Config
}

// ThroughputResult holds the times of each round.
type ThroughputResult struct {
	BodyBytes int
	Findings  int // findings in one scan of the body
	// Scan is the time ScanRequest took on a POST with the body, per round, sorted.
	Scan []time.Duration
	// Baseline is the time json.Valid took on the same body in the same rounds, sorted: a
	// reference for how fast this machine goes through the body at the moment.
	Baseline []time.Duration
}

// MBps is the throughput in MB/s (10⁶ bytes) at quantile q of the scan times: q=0.5 is the
// median, q=0.99 the p99 (slowest) round.
func (r ThroughputResult) MBps(q float64) float64 { return mbps(r.BodyBytes, r.Scan, q) }

// BaselineMBps is the same for the baseline.
func (r ThroughputResult) BaselineMBps(q float64) float64 { return mbps(r.BodyBytes, r.Baseline, q) }

func mbps(n int, ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	d := ds[min(len(ds)-1, int(q*float64(len(ds))))]
	return float64(n) / 1e6 / d.Seconds()
}

// MeasureThroughput scans a BenchBody with ScanRequest Rounds times, alternating with the
// baseline, and returns the times.
func MeasureThroughput(ctx context.Context, o ThroughputOptions) (ThroughputResult, error) {
	if o.BodyBytes <= 0 {
		o.BodyBytes = 10_000_000
	}
	if o.Rounds <= 0 {
		o.Rounds = 20
	}
	s, err := New(o.Config)
	if err != nil {
		return ThroughputResult{}, err
	}
	body := BenchBody(o.BodyBytes)
	res := ThroughputResult{BodyBytes: len(body)}
	for i := 0; i < o.Rounds; i++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.com/v1/chat/completions", bytes.NewReader(body))
		if err != nil {
			return res, err
		}
		req.Header.Set("Content-Type", "application/json")
		t := time.Now()
		v, err := s.ScanRequest(req)
		res.Scan = append(res.Scan, time.Since(t))
		if err != nil {
			return res, err
		}
		res.Findings = len(v.Findings)
		t = time.Now()
		json.Valid(body)
		res.Baseline = append(res.Baseline, time.Since(t))
	}
	sort.Slice(res.Scan, func(i, j int) bool { return res.Scan[i] < res.Scan[j] })
	sort.Slice(res.Baseline, func(i, j int) bool { return res.Baseline[i] < res.Baseline[j] })
	return res, nil
}
