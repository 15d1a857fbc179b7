package cli

import (
	"github.com/agentbox-dev/agentbox/internal/config"
	"github.com/agentbox-dev/agentbox/internal/router"
	"github.com/agentbox-dev/agentbox/internal/runtimes/heavy"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// mayNeedHeavy reports whether an auto run of code could go to the heavy tier: it imports a
// module the nano build lacks (by the module list setup probed). A local engine starts the heavy
// tier (seconds, and root) only then; the engine's own router makes the real decision. Without a
// module list the answer is yes, and the engine decides.
func mayNeedHeavy(cfg config.Config, code string) bool {
	mods, err := nano.ReadModules(nano.Artifacts{Dir: cfg.NanoDir()})
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
