package sandbox

// Decision is where a run goes and why. Reasons are written for people ("nano: imports only json,
// re (all in nano)") and are shown in every result and audit record.
type Decision struct {
	Tier    Tier     `json:"tier"`
	Reasons []string `json:"reasons"`
	// Ranked are the tiers that could run the code, best first, as the router read it; Tier is the
	// first of them whose capabilities fit the request. A run that meets what its tier cannot do
	// falls back along the list (route.go). Empty: Tier alone.
	Ranked []Tier `json:"-"`
	// SyntaxError, when set, is the code's own syntax error, found while routing: the run is
	// answered with it as the code's exception (exit code 1), and no sandbox starts.
	SyntaxError *PyError `json:"-"`
	// Guess, on a decision away from the first tier, says it rests only on imports no tier was
	// found to have (a module the code writes itself, a typo): the other tier is the likelier
	// home, not one the first cannot stand in for. A one-shot run goes there all the same; a
	// session does not move for it.
	Guess bool `json:"-"`
}

// Router reads a request's code and ranks the tiers that could run it, with reasons. The Manager
// calls it for requests whose tier is auto and for explicit requests, which it checks (an explicit
// request for a tier that cannot import what the code imports fails before a sandbox starts).
// Requests that ask for packages, an image or network are placed by capabilities alone and never
// reach it. The Manager owns this interface; the import-reading router (package router) is one
// implementation. Without one, the Manager ranks the tiers in the order they were given.
type Router interface {
	Route(req *RunRequest) (Decision, error)
}
