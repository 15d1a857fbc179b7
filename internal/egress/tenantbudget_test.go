package egress

import (
	"strings"
	"testing"
)

// A tenant's sandboxes share its daily budget: past it, requests of any of its sessions are
// refused naming the quota, while another tenant's go on.
func TestTenantDailyBudget(t *testing.T) {
	f := newFixture(t, exfilPolicy, NewDLPInspector())
	tenant := "acme"
	f.g.opts.TenantBudget = func(session string) (string, int64) { return tenant, 4096 }
	body := strings.Repeat("a", 1500)
	for i := range 2 {
		if status, b := f.get(t, "POST", "https://api.allowed.test/up", body); status != 200 {
			t.Fatalf("post %d: %d %q", i, status, b)
		}
	}
	status, b := f.get(t, "POST", "https://a.attacker.test/up", body)
	if status != 403 || !strings.Contains(b, "tenant acme has sent") || !strings.Contains(b, "egress_bytes_per_day") {
		t.Fatalf("past the tenant's budget: %d %q", status, b)
	}
	tenant = "beta" // the same sandbox, now counted as another tenant's
	if status, b := f.get(t, "POST", "https://api.allowed.test/up", body); status != 200 {
		t.Fatalf("another tenant: %d %q", status, b)
	}
}
