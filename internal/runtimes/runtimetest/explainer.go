package runtimetest

import (
	"context"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// explainer holds a runtime that reads its results for what its tier cannot give
// (sandbox.Explainer) to the interface's rules: a result without an exception is never a Need,
// even when its output reads like a refusal, and neither is a result with an API error (a
// limit). With an interpreter, the results are the tier's own.
func (s *suite) explainer(t *testing.T) {
	x, ok := s.rt.(sandbox.Explainer)
	if !ok {
		t.Skip("the tier does not read its results for what it cannot give (sandbox.Explainer)")
	}
	never := func(what string, res *sandbox.Result, err error) {
		t.Helper()
		if need, ok := x.Cannot(res, err); ok {
			t.Errorf("%s: read as a Need %+v", what, need)
		}
	}
	refusal := &sandbox.PyError{Name: "ModuleNotFoundError", Value: "No module named 'pandas'"}
	thread := &sandbox.PyError{Name: "RuntimeError", Value: "can't start new thread"}
	looksLike := "RuntimeError: can't start new thread\nModuleNotFoundError: No module named 'pandas'\n"
	for what, res := range map[string]*sandbox.Result{
		"a result":                      {Stdout: "ok\n"},
		"a result that prints refusals": {Stdout: looksLike, Stderr: looksLike},
		"a nonzero exit":                {ExitCode: 3, Stderr: looksLike},
	} {
		res.Runtime = s.rt.Capabilities().Tier
		never(what, res, nil)
	}
	for _, kind := range []sandbox.Kind{sandbox.KindTimeout, sandbox.KindMemoryLimit, sandbox.KindOutputLimit} {
		for _, pe := range []*sandbox.PyError{refusal, thread} {
			partial := &sandbox.Result{ExitCode: 1, Error: pe, Runtime: s.rt.Capabilities().Tier}
			err := &sandbox.Error{Kind: kind, Message: "a limit", Result: partial}
			never(string(kind)+" after "+pe.Name, partial, err)
			never(string(kind)+" after "+pe.Name+", no result", nil, err)
		}
	}
	if s.opts.NoInterpreter {
		return
	}
	for _, code := range []string{
		"print('ok')\n",
		"import sys\nprint(\"RuntimeError: can't start new thread\")\nprint(\"ModuleNotFoundError: No module named 'pandas'\", file=sys.stderr)\n",
		"import sys\nsys.exit(3)\n",
	} {
		res := s.run(t, s.req(t, code))
		never(code, res, nil)
	}
	req := s.req(t, "print('started', flush=True)\nwhile True:\n    pass\n")
	req.Limits.Timeout = time.Second
	res, err := s.rt.Run(context.Background(), req)
	if err == nil {
		t.Fatalf("an endless loop ended: %+v", res)
	}
	never("a timeout", res, err)
	never("a timeout's partial result", sandbox.AsError(err).Result, err)
}
