package egress

import (
	"fmt"
	"slices"
	"strings"
)

// Target is what a policy decides on: one request, or at CONNECT time only the host and port
// (Method and Path empty).
type Target struct {
	Host   string // lower case, no port, no trailing dot
	Port   int
	Method string
	Path   string
}

func (t Target) String() string {
	if t.Method == "" {
		return fmt.Sprintf("%s:%d", t.Host, t.Port)
	}
	return fmt.Sprintf("%s %s:%d%s", t.Method, t.Host, t.Port, t.Path)
}

// Decision is the policy's verdict on a Target.
type Decision struct {
	Allowed bool
	// Rule names the rule that decided ("allow[2] github.com (line 12)", "intent weather-lookup",
	// "no allow rule matches").
	Rule string
	// Reason is written for the agent whose request it is.
	Reason string
}

// matchDomain matches a host against a rule's domain.
func matchDomain(pattern, host string) bool {
	if pattern == "*" {
		return true
	}
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(host, "."+strings.ToLower(suffix))
	}
	return strings.EqualFold(pattern, host)
}

// matches reports whether r matches t. At CONNECT time (no method) a rule matches on host and
// port alone: the inner requests are checked again.
func (r *Rule) matches(t Target) bool {
	if !matchDomain(r.Domain, t.Host) {
		return false
	}
	ports := r.Ports
	if len(ports) == 0 {
		ports = []int{80, 443}
	}
	if !slices.Contains(ports, t.Port) {
		return false
	}
	if t.Method == "" {
		return true
	}
	if len(r.Methods) > 0 && !slices.Contains(r.Methods, strings.ToUpper(t.Method)) {
		return false
	}
	if len(r.Paths) > 0 && !slices.ContainsFunc(r.Paths, func(p string) bool { return strings.HasPrefix(t.Path, p) }) {
		return false
	}
	return true
}

func (r *Rule) describe(kind string, i int) string {
	s := fmt.Sprintf("%s[%d] %s", kind, i, r.Domain)
	if r.line > 0 {
		s += fmt.Sprintf(" (line %d)", r.line)
	}
	return s
}

// Decide applies the profile to t with the session's current intent (empty for none). Deny
// rules win over allow rules; what nothing allows is denied.
func (p *Profile) Decide(t Target, intent string) Decision {
	if p.Mode == ModeDisabled {
		return Decision{Allowed: true, Rule: "mode disabled"}
	}
	for i := range p.Deny {
		if p.Deny[i].matches(t) {
			return Decision{Rule: p.Deny[i].describe("deny", i),
				Reason: fmt.Sprintf("egress to %s is denied by profile %s", t.Host, p.Name)}
		}
	}
	for i := range p.Allow {
		if p.Allow[i].matches(t) {
			return Decision{Allowed: true, Rule: p.Allow[i].describe("allow", i)}
		}
	}
	if in, ok := p.Intents[intent]; ok {
		for i := range in.Allow {
			if in.Allow[i].matches(t) {
				return Decision{Allowed: true, Rule: in.Allow[i].describe("intent "+intent+" allow", i)}
			}
		}
	}
	reason := fmt.Sprintf("egress to %s is not allowed by profile %s", t, p.Name)
	if intent != "" {
		reason += fmt.Sprintf(" nor by the current intent %s", intent)
	}
	// Say which intents would open it, so an agent knows what to ask for.
	var opens []string
	for name, in := range p.Intents {
		if name == intent {
			continue
		}
		for i := range in.Allow {
			if in.Allow[i].matches(t) {
				opens = append(opens, name)
				break
			}
		}
	}
	if len(opens) > 0 {
		slices.Sort(opens)
		reason += fmt.Sprintf("; the intent %s would allow it", strings.Join(opens, " or "))
	}
	return Decision{Rule: "no allow rule matches", Reason: reason}
}

// Passthrough reports whether host is tunnelled without interception.
func (p *Profile) isPassthrough(host string) bool {
	return slices.ContainsFunc(p.Passthrough, func(d string) bool { return matchDomain(d, host) })
}

// portExplicit reports whether some allow rule (or the intent's) names port explicitly, which
// lifts the dangerous-port ban for it.
func (p *Profile) portExplicit(t Target, intent string) bool {
	check := func(rules []Rule) bool {
		return slices.ContainsFunc(rules, func(r Rule) bool {
			return matchDomain(r.Domain, t.Host) && slices.Contains(r.Ports, t.Port)
		})
	}
	if check(p.Allow) {
		return true
	}
	if in, ok := p.Intents[intent]; ok {
		return check(in.Allow)
	}
	return false
}
