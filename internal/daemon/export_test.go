package daemon

// MountAll is the listener's mounts, for TestMounts (http_test.go) over a stand-in HTTP API.
var MountAll = mountAll
