package gateway

// ReplayLimit is replayLimit, for the tests of what is sent twice.
const ReplayLimit = replayLimit
