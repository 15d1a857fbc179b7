package sandbox

// WarmReporter is an optional ability of a Runtime: how many sandboxes it started ahead of need
// and holds free now, by image ("default" for a tier without images). A cluster's gateway places
// work on the node where it starts fastest by it. Cheap: no sandbox is touched.
type WarmReporter interface {
	WarmFree() map[string]int
}

// SessionWarmReporter is an optional ability of a WarmReporter whose tier keeps sandboxes for
// new sessions apart from those of one-shot runs: it counts those, by image.
type SessionWarmReporter interface {
	WarmSessions() map[string]int
}

// DefaultImage is the image key of WarmReporter for a tier that runs no images.
const DefaultImage = "default"

// TierLoad is what one tier holds now: its free warm sandboxes and its open sessions.
type TierLoad struct {
	Tier     Tier
	WarmFree map[string]int
	// WarmSessions is nil unless the tier keeps sandboxes for sessions apart (SessionWarmReporter).
	WarmSessions map[string]int
	Sessions     int
}

// Load says what this Manager could take now: per tier (in the Manager's order), its free warm
// sandboxes (empty for a tier that does not report them) and open sessions; the open sessions of
// every tier and the cap on them (ManagerOptions.MaxSessions).
func (m *Manager) Load() (tiers []TierLoad, sessions, maxSessions int) {
	m.mu.Lock()
	byTier := map[Tier]int{}
	for _, s := range m.sessions {
		byTier[s.info.Tier]++
	}
	sessions = len(m.sessions)
	m.mu.Unlock()
	for _, t := range m.tiers {
		l := TierLoad{Tier: t.caps.Tier, Sessions: byTier[t.caps.Tier], WarmFree: map[string]int{}}
		if w, ok := t.rt.(WarmReporter); ok {
			l.WarmFree = w.WarmFree()
		}
		if w, ok := t.rt.(SessionWarmReporter); ok {
			l.WarmSessions = w.WarmSessions()
		}
		tiers = append(tiers, l)
	}
	return tiers, sessions, m.maxSessions
}
