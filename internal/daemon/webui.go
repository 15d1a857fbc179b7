package daemon

import (
	"context"
	"fmt"

	"github.com/agentbox-dev/agentbox/internal/audit"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
	"github.com/agentbox-dev/agentbox/internal/webui"
)

// auditVerifier is how the web console checks the whole audit log (what `agentbox audit verify`
// does), against the log's own public key: nil when the engine has no audit log.
func auditVerifier(e any) func(context.Context) (webui.AuditCheck, error) {
	a, ok := e.(*sandbox.Audited)
	if !ok {
		return nil
	}
	l := auditLogOf(a.Sink())
	if l == nil {
		return nil
	}
	return func(ctx context.Context) (webui.AuditCheck, error) {
		r, err := audit.Verify(ctx, l.Dir(), l.PublicKey())
		if err != nil {
			return webui.AuditCheck{}, fmt.Errorf("audit log %s: %w", l.Dir(), err)
		}
		c := webui.AuditCheck{OK: r.OK(), Records: r.Records, Checkpoints: r.Checkpoints,
			Unsigned: r.Unsigned, Summary: r.String(), Warnings: r.Warnings}
		if r.Last != nil {
			c.LastSigned, c.LastSize = r.Last.Time, r.Last.Size
		}
		for _, p := range r.Problems {
			c.Problems = append(c.Problems, p.Message)
		}
		if r.Omitted > 0 {
			c.Problems = append(c.Problems, fmt.Sprintf("and %d more", r.Omitted))
		}
		return c, nil
	}
}
