package runtimetest

import (
	"context"
	"errors"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// capabilities holds the tier to what its Capabilities state: they name it and agree with its
// abilities, a request at its largest limits works, results carry its name, and NewSession works
// exactly when Sessions says so.
func (s *suite) capabilities(t *testing.T) {
	c := s.rt.Capabilities()
	if c.Tier == "" || c.Tier == sandbox.TierAuto {
		t.Fatalf("Capabilities().Tier is %q: a tier needs a name of its own", c.Tier)
	}
	if c != s.rt.Capabilities() {
		t.Errorf("Capabilities changed between two calls: %+v then %+v", c, s.rt.Capabilities())
	}
	if c.SessionFiles && !c.Sessions {
		t.Errorf("Capabilities state SessionFiles without Sessions")
	}
	cat, isCat := s.rt.(sandbox.Catalog)
	if c.Images && !isCat {
		t.Errorf("Capabilities state Images, but the runtime is no sandbox.Catalog")
	}
	if isCat && len(cat.Images()) > 0 && !c.Images {
		t.Errorf("the runtime lists %d images, but its Capabilities do not state Images", len(cat.Images()))
	}
	t.Run("MaxLimits", s.maxLimits)
	t.Run("TierInResults", s.tierInResults)
	t.Run("Sessions", s.sessionsStated)
}

// maxLimits runs a request at the largest limits the tier takes: its own Max where it states
// one, the default policy's maximum elsewhere (the Manager lets no request past either).
func (s *suite) maxLimits(t *testing.T) {
	l := maxLimits(s.rt.Capabilities().Max)
	req := s.req(t, "print('ok')\n")
	req.Limits = l
	res, err := s.rt.Run(context.Background(), req)
	if err != nil {
		t.Fatalf("a run at the largest limits %+v: %v", l, err)
	}
	s.checkOK(t, res, "a run at the largest limits")
	if !s.rt.Capabilities().Sessions {
		return
	}
	sess, err := s.rt.NewSession(context.Background(), sandbox.SessionOptions{Tier: s.rt.Capabilities().Tier, Limits: l})
	if err != nil {
		t.Fatalf("a session at the largest limits %+v: %v", l, err)
	}
	defer sess.Close()
	req = s.req(t, "print('ok')\n")
	req.Limits = l
	res, err = sess.Run(context.Background(), req)
	if err != nil {
		t.Fatalf("a session run at the largest limits %+v: %v", l, err)
	}
	s.checkOK(t, res, "a session run at the largest limits")
}

// maxLimits returns the default policy's maximum, lowered to the tier's own caps.
func maxLimits(m sandbox.Limits) sandbox.Limits {
	l := sandbox.DefaultPolicy().Max
	lower := func(v *int64, cap int64) {
		if cap > 0 && cap < *v {
			*v = cap
		}
	}
	if m.Timeout > 0 && m.Timeout < l.Timeout {
		l.Timeout = m.Timeout
	}
	lower(&l.MemoryBytes, m.MemoryBytes)
	lower(&l.StdoutBytes, m.StdoutBytes)
	lower(&l.StderrBytes, m.StderrBytes)
	lower(&l.FilesBytes, m.FilesBytes)
	return l
}

// checkOK checks a result of print('ok'): no exception, exit 0, the tier's name, and (with an
// interpreter) the output.
func (s *suite) checkOK(t *testing.T, res *sandbox.Result, what string) {
	t.Helper()
	if res == nil {
		t.Fatalf("%s: no result", what)
	}
	if res.Error != nil || res.ExitCode != 0 {
		t.Errorf("%s: exit %d error %+v", what, res.ExitCode, res.Error)
	}
	if !s.opts.NoInterpreter && res.Stdout != "ok\n" {
		t.Errorf("%s: stdout %q, want \"ok\\n\"", what, res.Stdout)
	}
	if res.Runtime != s.rt.Capabilities().Tier {
		t.Errorf("%s: result says runtime %q, want %q", what, res.Runtime, s.rt.Capabilities().Tier)
	}
}

// tierInResults: results of one-shot and session runs name the tier as its Capabilities do.
func (s *suite) tierInResults(t *testing.T) {
	res, err := s.rt.Run(context.Background(), s.req(t, "print('ok')\n"))
	if err != nil {
		t.Fatal(err)
	}
	s.checkOK(t, res, "a one-shot run")
	if !s.rt.Capabilities().Sessions {
		return
	}
	sess := s.newSession(t)
	res, err = sess.Run(context.Background(), s.req(t, "print('ok')\n"))
	if err != nil {
		t.Fatal(err)
	}
	s.checkOK(t, res, "a session run")
}

// sessionsStated: NewSession works, and gives sandbox.SessionFiles exactly when SessionFiles is
// stated, when Sessions is; it fails with a typed error when it is not.
func (s *suite) sessionsStated(t *testing.T) {
	c := s.rt.Capabilities()
	if !c.Sessions {
		sess, err := s.rt.NewSession(context.Background(), sandbox.SessionOptions{Tier: c.Tier, Limits: s.req(t, "").Limits})
		var e *sandbox.Error
		if err == nil || !errors.As(err, &e) {
			t.Errorf("NewSession of a tier without Sessions: %v, want a *sandbox.Error", err)
		}
		if sess != nil {
			sess.Close()
			t.Errorf("NewSession of a tier without Sessions returned a session")
		}
		return
	}
	sess := s.newSession(t)
	if _, ok := sess.(sandbox.SessionFiles); ok != c.SessionFiles {
		t.Errorf("the session is a sandbox.SessionFiles: %v; Capabilities.SessionFiles: %v", ok, c.SessionFiles)
	}
}

// newSession starts a session at the default limits, closed when the test ends.
func (s *suite) newSession(t *testing.T) sandbox.Session {
	t.Helper()
	sess, err := s.rt.NewSession(context.Background(), sandbox.SessionOptions{Tier: s.rt.Capabilities().Tier, Limits: s.req(t, "").Limits})
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	t.Cleanup(func() { _ = sess.Close() })
	return sess
}
