package sandbox

// Decision is where a run goes and why. Reasons are written for people ("nano: imports only json,
// re (all in nano)") and are shown in every result and audit record.
type Decision struct {
	Tier    Tier     `json:"tier"`
	Reasons []string `json:"reasons"`
}

// Router picks a tier for a request whose tier is auto. The Manager owns this interface; the
// import-reading router is one implementation.
type Router interface {
	Route(req *RunRequest) (Decision, error)
}

// staticRouter sends every auto request to one tier; it stands in while no code-reading router is
// configured.
type staticRouter struct{ tier Tier }

func (r staticRouter) Route(*RunRequest) (Decision, error) {
	return Decision{Tier: r.tier, Reasons: []string{string(r.tier) + ": the only tier this daemon runs"}}, nil
}
