package bench

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
	"github.com/agentbox-dev/agentbox/internal/daemon"
)

// httpTarget reaches a daemon through the public Go client, as any user of the API would.
type httpTarget struct {
	c *client.Client
	// tier is what runs and sessions ask for (api.RuntimeNano unless set).
	tier string
	// stop, when set, stops the daemon the bench started for this target.
	stop func() error
	// memory, when set, reads the PSS of the daemon's processes: set for daemons the bench
	// starts, whose processes it knows.
	memory func(ctx context.Context) (memSample, error)
	// doors and key are the front doors and key of a daemon the bench started (bench e2b serves
	// the E2B front door's own listener with them).
	doors *daemon.FrontDoors
	key   string
}

// Interface guards.
var (
	_ target        = (*httpTarget)(nil)
	_ targetSession = (*httpSession)(nil)
)

// newHTTPTarget makes a client of the daemon at url. Its transport keeps enough idle connections
// for every concurrent client: with net/http's default of two per host, the others would open a
// new connection for each run and the throughput figure would include TCP set-up.
func newHTTPTarget(url, key string) (*httpTarget, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 64
	tr.MaxIdleConnsPerHost = 64
	c, err := client.New(url, key, client.WithHTTPClient(&http.Client{Transport: tr}), client.WithUserAgent("agentbox-bench"))
	if err != nil {
		return nil, err
	}
	return &httpTarget{c: c, tier: api.RuntimeNano}, nil
}

func (t *httpTarget) Run(ctx context.Context, code string, timeout time.Duration) (runResult, error) {
	res, err := t.c.Run(ctx, api.RunRequest{Code: code, Runtime: t.tier, Timeout: timeout.Seconds()})
	if err != nil {
		return runResult{}, err
	}
	return fromAPI(res), nil
}

func fromAPI(res *api.Result) runResult {
	r := runResult{
		Stdout:  res.Stdout,
		Pool:    res.Timings.Pool,
		Execute: time.Duration(res.Timings.ExecuteMS * float64(time.Millisecond)),
	}
	switch {
	case res.Error != nil:
		r.Failure = fmt.Sprintf("%s: %s", res.Error.Name, res.Error.Value)
	case res.ExitCode != 0:
		r.Failure = fmt.Sprintf("exit code %d: %s", res.ExitCode, truncate(strings.TrimSpace(res.Stderr), 500))
	}
	return r
}

func (t *httpTarget) NewSession(ctx context.Context) (targetSession, error) {
	s, err := t.c.CreateSession(ctx, api.CreateSessionRequest{Runtime: t.tier})
	if err != nil {
		return nil, err
	}
	return &httpSession{c: t.c, id: s.ID}, nil
}

// Pool reads the tier's state from GET /v1/health.
func (t *httpTarget) Pool(ctx context.Context) (poolState, bool, error) {
	h, err := t.c.Health(ctx)
	if err != nil {
		return poolState{}, false, err
	}
	parse := parsePool
	if t.tier == api.RuntimeHeavy {
		parse = parseHeavyPool
	}
	for _, rt := range h.Runtimes {
		if rt.Name == t.tier {
			p, ok := parse(rt.State)
			return p, ok, nil
		}
	}
	return poolState{}, false, fmt.Errorf("the daemon at %s runs no %s tier", t.c.URL(), t.tier)
}

func (t *httpTarget) Memory(ctx context.Context) (memSample, error) {
	if t.memory == nil {
		return memSample{}, errNotOurs
	}
	return t.memory(ctx)
}

// version is the daemon's version as its health reports it.
func (t *httpTarget) version(ctx context.Context) string {
	h, err := t.c.Health(ctx)
	if err != nil {
		return "unknown version"
	}
	return h.Version
}

func (t *httpTarget) Close() error {
	if t.stop != nil {
		return t.stop()
	}
	return nil
}

type httpSession struct {
	c  *client.Client
	id string
}

func (s *httpSession) Run(ctx context.Context, code string) (runResult, error) {
	res, err := s.c.RunInSession(ctx, s.id, api.RunRequest{Code: code})
	if err != nil {
		return runResult{}, err
	}
	return fromAPI(res), nil
}

func (s *httpSession) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.c.CloseSession(ctx, s.id)
}
