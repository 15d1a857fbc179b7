package daemon

import (
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/router"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// ForOneRun tunes cfg for a local engine that answers a single run (`agentbox run` without a
// daemon): one nano worker and no parked interpreters, since the run starts its own; no booted
// heavy sandboxes; and heavy not started at all (seconds, and root) unless the run asks for it
// (runtime heavy, packages) or its code may need it (mayNeedHeavy). The engine's own router still
// makes the real decision.
func ForOneRun(cfg config.Config, code string, runtime sandbox.Tier, packages []string) (config.Config, error) {
	cfg.Sessions.Ephemeral = true // one run: no sessions to keep, and a daemon may hold the directory
	err := nano.Configure(&cfg, func(n *nano.Config) {
		warm := 0
		n.Workers, n.Warm = 1, &warm
	})
	if err != nil {
		return cfg, err
	}
	needsHeavy := runtime == heavy.Tier || runtime != nano.Tier && (len(packages) > 0 || mayNeedHeavy(cfg, code))
	err = heavy.Configure(&cfg, func(h *heavy.Config) {
		warm := 0
		h.Warm = &warm
		if !needsHeavy {
			h.Enabled = heavy.Off
		}
	})
	return cfg, err
}

// mayNeedHeavy reports whether an auto run of code could go to the heavy tier: it imports a
// module the nano build lacks (by the module list setup probed). Without a module list the answer
// is yes, and the engine decides.
func mayNeedHeavy(cfg config.Config, code string) bool {
	mods, err := nano.ReadModules(nano.Artifacts{Dir: nano.Dir(cfg)})
	if err != nil {
		return true
	}
	r := router.New(router.Options{
		Names: router.Names{Fixed: nano.Tier, Images: heavy.Tier},
		Nano:  router.NanoModules{Version: mods.Version, Available: mods.Available, Unavailable: mods.Unavailable},
		// No images known yet: a module nano lacks then routes to heavy as "in no image".
		Images: func() []sandbox.ImageInfo { return nil },
	})
	d, err := r.Route(&sandbox.RunRequest{Code: code, Tier: sandbox.TierAuto})
	return err == nil && d.Tier == heavy.Tier
}
