package api

// Health states.
const (
	HealthOK          = "ok"          // every runtime can take runs
	HealthDegraded    = "degraded"    // some runtime cannot
	HealthUnavailable = "unavailable" // no runtime can; the status code is 503
)

// Health is the body of GET /v1/health, which needs no API key.
type Health struct {
	// Status is "ok", "degraded" or "unavailable".
	Status string `json:"status"`
	// Version is the daemon's version.
	Version string `json:"version"`
	// Runtimes are the daemon's runtimes by name.
	Runtimes []RuntimeHealth `json:"runtimes"`
}

// RuntimeHealth is one runtime's state.
type RuntimeHealth struct {
	Name string `json:"name"`
	// OK says whether the runtime can take runs.
	OK bool `json:"ok"`
	// State is a short description for people, e.g. "4 of 4 workers free".
	State string `json:"state"`
}
