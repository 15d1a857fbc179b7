package cluster

// AdoptRequest is the body of a node's POST /v1/node/adopt.
type AdoptRequest struct {
	Session string `json:"session"`
	// Reason says why the caller asks (written into the session's notice), e.g. "node a is gone".
	Reason string `json:"reason,omitempty"`
}

// AdoptResult is its answer: who owns the session now and where to send its requests. Adopted
// says this call moved it here; Step is the step it resumes from (when it is this node's).
type AdoptResult struct {
	Owner   string `json:"owner"`
	Addr    string `json:"addr"`
	Adopted bool   `json:"adopted"`
	Step    string `json:"step,omitempty"`
}

// DrainResult is the answer of a node's POST /v1/node/drain: the sessions it gave up, each now
// adoptable by another node at its latest durable step.
type DrainResult struct {
	Draining bool     `json:"draining"`
	Released []string `json:"released"`
	// Failed names sessions that could not be released, with why.
	Failed string `json:"failed,omitempty"`
}
