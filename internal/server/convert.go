package server

import (
	"math"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// RunRequestFromAPI turns a wire request into the core's request. Units are converted
// (seconds, MiB); bounds are left to the Manager's policy, which names the limit it refuses,
// except a timeout too large to represent at all. The local engine of `agentbox run` uses it
// too, so both paths read requests the same way.
func RunRequestFromAPI(in api.RunRequest) (sandbox.RunRequest, error) {
	if err := checkTimeout(in.Timeout); err != nil {
		return sandbox.RunRequest{}, err
	}
	out := sandbox.RunRequest{
		Code: in.Code,
		Tier: tier(in.Runtime),
		Limits: sandbox.Limits{
			Timeout:     seconds(in.Timeout),
			MemoryBytes: mebibytes(in.MemoryMB),
			StdoutBytes: in.StdoutLimit,
			StderrBytes: in.StderrLimit,
			FilesBytes:  in.FilesLimit,
		},
		Env:           in.Env,
		Packages:      in.Packages,
		Image:         in.Image,
		Network:       in.Network,
		EgressProfile: in.EgressProfile,
	}
	for _, f := range in.Files {
		out.Files = append(out.Files, sandbox.File{Path: f.Path, Content: f.Content})
	}
	if d := in.Deterministic; d != nil {
		t := d.Time
		if t.IsZero() {
			t = time.Unix(0, 0).UTC()
		}
		out.Deterministic = &sandbox.Determinism{Time: t, Seed: d.Seed}
	}
	return out, nil
}

// maxSeconds is the largest timeout a time.Duration holds (about 292 years).
const maxSeconds = float64(math.MaxInt64) / float64(time.Second)

func checkTimeout(s float64) error {
	if s >= maxSeconds {
		return invalid("timeout %g s is far above any server's maximum", s).
			WithHint("give the timeout in seconds, e.g. 30")
	}
	return nil
}

func sessionOptionsFromAPI(in api.CreateSessionRequest) (sandbox.SessionOptions, error) {
	if err := checkTimeout(in.Timeout); err != nil {
		return sandbox.SessionOptions{}, err
	}
	return sandbox.SessionOptions{
		Tier: tier(in.Runtime),
		Limits: sandbox.Limits{
			Timeout:     seconds(in.Timeout),
			MemoryBytes: mebibytes(in.MemoryMB),
			StdoutBytes: in.StdoutLimit,
			StderrBytes: in.StderrLimit,
			FilesBytes:  in.FilesLimit,
		},
		Env:           in.Env,
		Packages:      in.Packages,
		Image:         in.Image,
		Network:       in.Network,
		EgressProfile: in.EgressProfile,
	}, nil
}

func tier(s string) sandbox.Tier {
	if s == "" {
		return sandbox.TierAuto
	}
	return sandbox.Tier(s)
}

// seconds converts a wire timeout. Values too large for a Duration saturate, so the policy
// reports them as above the maximum instead of wrapping around; a tiny positive value stays
// positive instead of becoming "the default".
func seconds(s float64) time.Duration {
	switch {
	case math.IsNaN(s) || s < 0:
		return -1
	case s == 0:
		return 0
	case s >= maxSeconds:
		return math.MaxInt64
	}
	d := time.Duration(s * float64(time.Second))
	if d == 0 {
		d = 1
	}
	return d
}

func mebibytes(mb int64) int64 {
	switch {
	case mb < 0:
		return -1
	case mb > math.MaxInt64>>20:
		return math.MaxInt64
	}
	return mb << 20
}

// ResultToAPI turns the core's result into the wire result. It returns nil for nil.
func ResultToAPI(r *sandbox.Result) *api.Result {
	if r == nil {
		return nil
	}
	out := &api.Result{
		Stdout:          r.Stdout,
		Stderr:          r.Stderr,
		ExitCode:        r.ExitCode,
		Runtime:         string(r.Runtime),
		StdoutTruncated: r.StdoutTruncated,
		StderrTruncated: r.StderrTruncated,
		Files:           make([]api.OutputFile, 0, len(r.Files)),
		Artifacts:       make([]api.Artifact, 0, len(r.Artifacts)),
		Outputs:         make([]api.Output, 0, len(r.Outputs)),
		Routing:         api.Routing{Tier: string(r.Runtime), Reasons: []string{}},
		Timings: api.Timings{
			QueueMS:   millis(r.Timing.Queue),
			StartMS:   millis(r.Timing.Start),
			ExecuteMS: millis(r.Timing.Execute),
			TotalMS:   millis(r.Timing.Total),
			Pool:      r.Timing.Pool,
		},
	}
	if r.Error != nil {
		out.Error = &api.PyError{Name: r.Error.Name, Value: r.Error.Value, Traceback: r.Error.Traceback}
	}
	if r.Routing != nil {
		out.Routing.Tier = string(r.Routing.Tier)
		out.Routing.Reasons = append(out.Routing.Reasons, r.Routing.Reasons...)
	}
	for _, f := range r.Files {
		out.Files = append(out.Files, api.OutputFile{Path: f.Path, Content: f.Content, Size: int64(len(f.Content))})
	}
	for _, a := range r.Artifacts {
		out.Artifacts = append(out.Artifacts, api.Artifact{ID: a.ID, Name: a.Name, MIME: a.MIME, Size: a.Size, SHA256: a.SHA256})
	}
	for _, o := range r.Outputs {
		out.Outputs = append(out.Outputs, api.Output{Text: o.Text, HTML: o.HTML, JSON: o.JSON})
	}
	return out
}

// millis is d in milliseconds, to the microsecond.
func millis(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)) / 1000
}

// SessionToAPI turns the core's session description into the wire one.
func SessionToAPI(s sandbox.SessionInfo) api.Session {
	return api.Session{
		ID:      s.ID,
		Runtime: string(s.Tier),
		Limits: api.Limits{
			Timeout:     s.Limits.Timeout.Seconds(),
			MemoryMB:    s.Limits.MemoryBytes >> 20,
			StdoutLimit: s.Limits.StdoutBytes,
			StderrLimit: s.Limits.StderrBytes,
			FilesLimit:  s.Limits.FilesBytes,
		},
		CreatedAt:     s.CreatedAt,
		LastUsed:      s.LastUsed,
		Runs:          s.Runs,
		IdleTimeout:   s.IdleTimeout.Seconds(),
		Network:       s.Network,
		EgressProfile: s.EgressProfile,
	}
}
