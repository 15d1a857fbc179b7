package apiwire

import (
	"math"
	"sort"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// RunRequestFromAPI turns a wire request into the core's request. Units are converted
// (seconds, MiB); bounds are left to the Manager's policy, which names the limit it refuses,
// except a timeout too large to represent at all. The HTTP API and the local engine of
// `agentbox run` both use it, so both paths read requests the same way.
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

// SessionOptionsFromAPI turns a wire session request into the core's options, as
// RunRequestFromAPI does a run's.
func SessionOptionsFromAPI(in api.CreateSessionRequest) (sandbox.SessionOptions, error) {
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
		Volumes:       in.Volumes,
	}, nil
}

// DurationFromAPI turns a wire duration in seconds (an intent's ttl) into a Duration, refusing
// one too large to represent as a timeout is refused. Negative values stay negative for the core
// to refuse; zero means the core's default.
func DurationFromAPI(s float64) (time.Duration, error) {
	if err := checkTimeout(s); err != nil {
		return 0, err
	}
	return seconds(s), nil
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
			QueueMS:   Millis(r.Timing.Queue),
			StartMS:   Millis(r.Timing.Start),
			ExecuteMS: Millis(r.Timing.Execute),
			TotalMS:   Millis(r.Timing.Total),
			Pool:      r.Timing.Pool,
		},
		Step: r.Step,
	}
	if r.Error != nil {
		out.Error = &api.PyError{Name: r.Error.Name, Value: r.Error.Value, Traceback: r.Error.Traceback}
	}
	if r.Notice != nil {
		n := NoticeToAPI(*r.Notice)
		out.Notice = &n
	}
	if r.Routing != nil {
		out.Routing.Tier = string(r.Routing.Tier)
		out.Routing.Reasons = append(out.Routing.Reasons, r.Routing.Reasons...)
	}
	for _, f := range r.Files {
		out.Files = append(out.Files, api.OutputFile{Path: f.Path, Content: f.Content, Size: int64(len(f.Content))})
	}
	for _, a := range r.Artifacts {
		out.Artifacts = append(out.Artifacts, ArtifactToAPI(a))
	}
	for _, o := range r.Outputs {
		out.Outputs = append(out.Outputs, api.Output{Text: o.Text, HTML: o.HTML, JSON: o.JSON})
	}
	return out
}

// Millis is d in milliseconds, to the microsecond, as the wire gives every duration.
func Millis(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)) / 1000
}

// RoutingToAPI turns the router's decision into the wire one (POST /v1/route).
func RoutingToAPI(d sandbox.Decision) api.Routing {
	return api.Routing{Tier: string(d.Tier), Reasons: append([]string{}, d.Reasons...)}
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
		State:         stateOr(s.State),
		Head:          s.Head,
		Steps:         s.Steps,
		ForkedFrom:    s.ForkedFrom,
		KeptUntil:     timeOrNil(s.KeptUntil),
	}
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func stateOr(s sandbox.SessionState) string {
	if s == "" {
		return string(sandbox.SessionLive)
	}
	return string(s)
}

// SessionsToAPI lists sessions on the wire; none is an empty list, not null.
func SessionsToAPI(list []sandbox.SessionInfo) api.SessionList {
	out := api.SessionList{Sessions: []api.Session{}}
	for _, si := range list {
		out.Sessions = append(out.Sessions, SessionToAPI(si))
	}
	return out
}

// FilesToAPI lists a session's files on the wire, sorted by path.
func FilesToAPI(list []sandbox.FileInfo) api.FileList {
	out := api.FileList{Files: make([]api.FileInfo, 0, len(list))}
	for _, f := range list {
		out.Files = append(out.Files, api.FileInfo{Path: f.Path, Size: f.Size, Dir: f.Dir, ModTime: f.ModTime})
	}
	sort.Slice(out.Files, func(i, j int) bool { return out.Files[i].Path < out.Files[j].Path })
	return out
}

// ImagesToAPI lists the images on the wire; an image without packages has an empty map.
func ImagesToAPI(list []sandbox.ImageInfo) api.ImageList {
	out := api.ImageList{Images: []api.Image{}}
	for _, i := range list {
		pk := i.Packages
		if pk == nil {
			pk = map[string]string{}
		}
		out.Images = append(out.Images, api.Image{Name: i.Name, Hash: i.Hash, Default: i.Default, Python: i.Python, Packages: pk, SizeBytes: i.SizeBytes, Built: i.Built})
	}
	return out
}

// IntentToAPI turns a session's intent into the wire one: no expiry when there is none.
func IntentToAPI(in sandbox.IntentInfo) api.Intent {
	out := api.Intent{Name: in.Name}
	if in.Name != "" {
		t := in.Expires
		out.ExpiresAt = &t
	}
	return out
}

// SessionRunRequestFromAPI reads a run in a session: as RunRequestFromAPI, but the limits a
// session fixes for its whole life (memory, output and file limits) are refused, naming the field;
// a run in a session may set only its timeout. Front doors that take session runs share it.
func SessionRunRequestFromAPI(in api.RunRequest) (sandbox.RunRequest, error) {
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"memory_mb", in.MemoryMB != 0},
		{"stdout_limit", in.StdoutLimit != 0},
		{"stderr_limit", in.StderrLimit != 0},
		{"files_limit", in.FilesLimit != 0},
	} {
		if f.set {
			return sandbox.RunRequest{}, invalid("%s cannot change within a session", f.name).
				WithHint("set it when creating the session (POST /v1/sessions, or the session_create tool); a run in a session may set only its timeout")
		}
	}
	return RunRequestFromAPI(in)
}

// VolumeToAPI turns the core's volume into the wire's.
func VolumeToAPI(v sandbox.VolumeInfo) api.Volume {
	return api.Volume{Name: v.Name, QuotaBytes: v.QuotaBytes, CreatedAt: v.CreatedAt, MountedRW: v.MountedRW, MountedRO: v.MountedRO}
}

// ArtifactToAPI is an artifact's description as the API shows it.
func ArtifactToAPI(a sandbox.Artifact) api.Artifact {
	return api.Artifact{ID: a.ID, Name: a.Name, MIME: a.MIME, Size: a.Size, SHA256: a.SHA256, Chart: a.Chart}
}

// NoticeToAPI turns the core's notice into the wire notice.
func NoticeToAPI(n sandbox.Notice) api.Notice {
	return api.Notice{Kind: n.Kind, FromNode: n.FromNode, ToNode: n.ToNode, Step: n.Step, Reason: n.Reason}
}
