package bench

import (
	"context"

	"github.com/agentbox-dev/agentbox/internal/dlp"
	"github.com/agentbox-dev/agentbox/internal/egress"
)

// The egress bench's DLP figures come from package dlp: the scanner with its default policy on a
// 10 MB JSON body, against json.Valid on the same body in the same rounds.
func init() {
	dlpInspector = egress.NewDLPInspector()
	dlpBench = func([]byte) (float64, float64, error) {
		r, err := dlp.MeasureThroughput(context.Background(), dlp.ThroughputOptions{})
		if err != nil {
			return 0, 0, err
		}
		return r.MBps(0.5), r.BaselineMBps(0.5), nil
	}
}
