package dlp

import (
	"context"
	"os"
	"testing"
)

// TestThroughput10MB prints the figure `agentbox bench egress` reports: MeasureThroughput with
// its defaults (the default policy, a 10 MB BenchBody, 20 rounds). It takes a few seconds, so it
// runs only with DLP_THROUGHPUT=1 (=all: also without seed phrases, without decoding, and
// without the token pass at all):
//
//	DLP_THROUGHPUT=1 go test -run TestThroughput10MB -v ./internal/dlp
func TestThroughput10MB(t *testing.T) {
	if os.Getenv("DLP_THROUGHPUT") == "" {
		t.Skip("set DLP_THROUGHPUT=1 to measure")
	}
	cases := []struct {
		name string
		cfg  Config
	}{{"default", Config{}}}
	if os.Getenv("DLP_THROUGHPUT") == "all" { // what each part costs
		noSeed, noCrypto := DefaultActions(), DefaultActions()
		delete(noSeed, DetectorSeedPhrase)
		for _, d := range []string{DetectorSeedPhrase, DetectorCryptoAddress, DetectorCryptoPrivateKey} {
			delete(noCrypto, d)
		}
		cases = append(cases,
			struct {
				name string
				cfg  Config
			}{"no seed phrases", Config{Actions: noSeed}},
			struct {
				name string
				cfg  Config
			}{"decoding off", Config{Decode: DecodeConfig{Off: true}}},
			struct {
				name string
				cfg  Config
			}{"decoding and crypto off (no token pass)", Config{Actions: noCrypto, Decode: DecodeConfig{Off: true}}})
	}
	for _, c := range cases {
		res, err := MeasureThroughput(context.Background(), ThroughputOptions{Config: c.cfg})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: median %.0f MB/s (fastest tenth %.0f, slowest tenth %.0f), json.Valid %.0f MB/s, %d findings",
			c.name, res.MBps(0.5), res.MBps(0.1), res.MBps(0.9), res.BaselineMBps(0.5), res.Findings)
	}
}
