package sandbox

// Decision is where a run goes and why. Reasons are written for people ("nano: imports only json,
// re (all in nano)") and are shown in every result and audit record.
type Decision struct {
	Tier    Tier     `json:"tier"`
	Reasons []string `json:"reasons"`
	// SyntaxError, when set, is the code's own syntax error, found while routing: the run is
	// answered with it as the code's exception (exit code 1), and no sandbox starts.
	SyntaxError *PyError `json:"-"`
	// Guess, on a decision for heavy, says it rests only on imports no tier was found to have (a
	// module the code writes itself, a typo): heavy is the likelier home, not a tier nano cannot
	// stand in for. A one-shot run goes there all the same; a session does not move for it.
	Guess bool `json:"-"`
}

// Router picks a tier for a request whose tier is auto, and checks a request for the nano tier
// (whose code may import what nano lacks). Requests that ask for packages, an image or the heavy
// tier are decided by the Manager and never reach it. The Manager owns this interface; the
// import-reading router (package router) is one implementation.
type Router interface {
	Route(req *RunRequest) (Decision, error)
}

// staticRouter sends every auto request to one tier; it stands in while no code-reading router is
// configured.
type staticRouter struct{ tier Tier }

func (r staticRouter) Route(req *RunRequest) (Decision, error) {
	if req.Tier == TierNano {
		return Decision{Tier: TierNano, Reasons: []string{"nano: runtime requested"}}, nil
	}
	return Decision{Tier: r.tier, Reasons: []string{string(r.tier) + ": the only tier this daemon runs"}}, nil
}
