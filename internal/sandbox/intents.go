package sandbox

import (
	"time"
)

// Intents is the egress gateway as the Manager sees it: a session's current intent opens the
// rules its egress profile names for that intent, for as long as it lasts.
type Intents interface {
	SetIntent(session, profile, name string, ttl time.Duration) (expires time.Time, err error)
	ClearIntent(session string)
	Intent(session string) (name string, expires time.Time)
	// Forget drops what the gateway keeps of a closed session.
	Forget(session string)
}

// IntentInfo is a session's current intent.
type IntentInfo struct {
	Name    string    `json:"name"`
	Expires time.Time `json:"expires"`
}

func (m *Manager) intents(id string) (*session, error) {
	s, err := m.get(id)
	if err != nil {
		return nil, err
	}
	if m.egress == nil {
		return nil, Errorf(KindRuntimeUnavailable, "this daemon has no egress gateway, so there are no intents")
	}
	if !s.info.Network {
		return nil, Errorf(KindInvalidRequest, "session %s has no network, so an intent would open nothing", id).
			WithHint("create the session with network (\"network\": true)")
	}
	return s, nil
}

// SetIntent makes name the session's current intent for ttl (0: the intent's maximum).
func (m *Manager) SetIntent(id, name string, ttl time.Duration) (IntentInfo, error) {
	s, err := m.intents(id)
	if err != nil {
		return IntentInfo{}, err
	}
	if ttl < 0 {
		return IntentInfo{}, Errorf(KindInvalidRequest, "the intent's ttl must not be negative")
	}
	exp, err := m.egress.SetIntent(id, s.info.EgressProfile, name, ttl)
	if err != nil {
		return IntentInfo{}, &gatewayError{Errorf(KindInvalidRequest, "%v", err), err}
	}
	m.touch(s)
	m.log.Info("intent set", "session", id, "intent", name, "expires", exp)
	return IntentInfo{Name: name, Expires: exp.UTC()}, nil
}

// ClearIntent ends the session's current intent.
func (m *Manager) ClearIntent(id string) error {
	s, err := m.intents(id)
	if err != nil {
		return err
	}
	m.egress.ClearIntent(id)
	m.touch(s)
	m.log.Info("intent cleared", "session", id)
	return nil
}

// Intent returns the session's current intent; an empty name means none.
func (m *Manager) Intent(id string) (IntentInfo, error) {
	if _, err := m.intents(id); err != nil {
		return IntentInfo{}, err
	}
	name, exp := m.egress.Intent(id)
	if name == "" {
		return IntentInfo{}, nil
	}
	return IntentInfo{Name: name, Expires: exp.UTC()}, nil
}

// PolicyReloader is an optional ability of the Egress gateway: reading its policy files again.
type PolicyReloader interface {
	// ReloadPolicy reads the profiles again and returns their names; on an error the profiles
	// in force stay.
	ReloadPolicy() ([]string, error)
}

// ReloadEgressPolicy reads the egress profiles again (SIGHUP, POST /v1/egress/reload). A file
// with an error leaves the old profiles in force and says which line is wrong.
func (m *Manager) ReloadEgressPolicy() ([]string, error) {
	r, ok := m.egress.(PolicyReloader)
	if !ok {
		return nil, Errorf(KindRuntimeUnavailable, "this daemon has no egress gateway")
	}
	names, err := r.ReloadPolicy()
	if err != nil {
		m.log.Error("egress policy not reloaded; the old one stays", "err", err)
		return nil, &gatewayError{Errorf(KindInvalidRequest, "egress policy not reloaded (the old one stays): %v", err), err}
	}
	m.log.Info("egress policy reloaded", "profiles", names)
	return names, nil
}

// gatewayError is a refusal of the egress gateway's own (an intent the profile does not have, a
// policy file with an error), which Audited records as a refused policy change in the gateway's
// words. It is the *Error it wraps to everyone else.
type gatewayError struct {
	err   *Error
	cause error
}

func (g *gatewayError) Error() string { return g.err.Error() }
func (g *gatewayError) Unwrap() error { return g.err }
