package daemon

// For the tests of the listener (http_test.go): its lifecycle over any handler, and its mounts
// over a stand-in for the HTTP API.
var (
	NewFrontDoorsFor = newFrontDoors
	MountAll         = mountAll
)
