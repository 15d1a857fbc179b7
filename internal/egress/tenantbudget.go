package egress

import (
	"fmt"
	"sync"
	"time"
)

// TenantBudget names the tenant of a session (or of a one-shot run) and the bytes a day that
// tenant may send out, 0 for no bound. The daemon wires it to the Manager and the tenants'
// configuration; the gateway only counts.
type TenantBudget func(session string) (tenant string, perDay int64)

// tenantDays counts what each tenant sent today (UTC). In memory, per node, like the other
// counters of the gateway.
type tenantDays struct {
	mu   sync.Mutex
	day  string
	sent map[string]int64
}

// add counts n bytes for tenant today and returns the total.
func (d *tenantDays) add(tenant string, n int64) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.roll()
	d.sent[tenant] += n
	return d.sent[tenant]
}

// today returns what tenant sent today.
func (d *tenantDays) today(tenant string) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.roll()
	return d.sent[tenant]
}

// roll starts a new day's counts; d.mu is held.
func (d *tenantDays) roll() {
	if day := time.Now().UTC().Format(time.DateOnly); day != d.day || d.sent == nil {
		d.day, d.sent = day, map[string]int64{}
	}
}

// tenantOver says why a request of size more bytes from session would pass its tenant's daily
// budget, or "" when it would not (or there is no budget).
func (g *Gateway) tenantOver(session string, more int64) (tenant string, why string) {
	if g.opts.TenantBudget == nil {
		return "", ""
	}
	tenant, perDay := g.opts.TenantBudget(session)
	if tenant == "" || perDay <= 0 {
		return tenant, ""
	}
	if sent := g.days.today(tenant); sent+more > perDay {
		return tenant, fmt.Sprintf("tenant %s has sent %s today; its quota is %s a day (tenants.%s.egress_bytes_per_day)",
			tenant, ByteSize(sent), ByteSize(perDay), tenant)
	}
	return tenant, ""
}

// countTenant counts n bytes sent by session against its tenant's day.
func (g *Gateway) countTenant(session string, n int64) {
	if g.opts.TenantBudget == nil {
		return
	}
	if tenant, _ := g.opts.TenantBudget(session); tenant != "" {
		g.days.add(tenant, n)
	}
}
