package gateway

// ReplayLimit is replayLimit, for the tests of what is sent twice.
const ReplayLimit = replayLimit

// Polls is how many polls of the nodes' capacity have ended.
func (g *Gateway) Polls() uint64 { return g.polls.Load() }
