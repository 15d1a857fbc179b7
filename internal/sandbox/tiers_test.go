package sandbox_test

import (
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/runtimes/runtimetest"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The tiers the fakes of these tests stand in for, by name and capabilities as nano and heavy
// state them.
const (
	tierNano  sandbox.Tier = "nano"
	tierHeavy sandbox.Tier = "heavy"
)

// capsOf gives a fake of tier t nano's capabilities or heavy's.
func capsOf(t sandbox.Tier) sandbox.Capabilities {
	if t == tierNano || t == "" {
		return sandbox.Capabilities{Tier: tierNano, Sessions: true, Contained: true}
	}
	return sandbox.Capabilities{Tier: t, Images: true, Network: true, Threads: true, Processes: true,
		Sockets: true, Sessions: true, SessionFiles: true}
}

// explain reads a fake's result as the tier it stands in for would: nano's own rules (a
// nil *nano.Runtime reads results without its workers), nothing for heavy.
func explain(t sandbox.Tier, res *sandbox.Result, err error) (sandbox.Need, bool) {
	if t != tierNano && t != "" {
		return sandbox.Need{}, false
	}
	return (*nano.Runtime)(nil).Cannot(res, err)
}

// tierFake returns a runtimetest.Fake that stands in for tier t: its capabilities, and its way of
// reading results (explain).
func tierFake(t sandbox.Tier) *runtimetest.Fake {
	f := runtimetest.NewFake(capsOf(t))
	f.Explain = func(res *sandbox.Result, err error) (sandbox.Need, bool) { return explain(t, res, err) }
	return f
}
