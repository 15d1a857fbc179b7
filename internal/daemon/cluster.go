package daemon

import (
	"context"
	"io"
	"log/slog"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/cluster"
	"github.com/agentbox-dev/agentbox/internal/cluster/kube"
	"github.com/agentbox-dev/agentbox/internal/cluster/nomad"
	"github.com/agentbox-dev/agentbox/internal/config"
	clustergw "github.com/agentbox-dev/agentbox/internal/gateway"
)

// The ways this build finds a cluster's nodes, by the kind a --discovery spec names. Adding one
// is a package with its cluster.Kind and one line here, as builtinTiers lists the tiers.
var discoveryKinds = []cluster.Kind{
	cluster.StaticKind,
	kube.Kind,
	nomad.Kind,
}

// OpenDiscovery builds the Discovery cfg's spec names (--discovery); its watches end with ctx.
func OpenDiscovery(ctx context.Context, cfg config.Config, log *slog.Logger) (cluster.Discovery, error) {
	return cluster.Open(ctx, cfg.Cluster.Discovery, discoveryKinds, log)
}

// NewGatewayDoors builds what `agentbox serve --role gateway` serves: the gateway (internal/
// gateway) over the nodes discovery finds, behind the same keys the nodes are given, on the
// same listener and shutdown as a node's front doors. The caller closes the returned closer
// after Serve has returned.
func NewGatewayDoors(ctx context.Context, cfg config.Config, opts FrontDoorOptions) (*FrontDoors, io.Closer, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	keys, err := auth.NewKeys(opts.APIKey, opts.KeysFile)
	if err != nil {
		return nil, nil, err
	}
	disc, err := OpenDiscovery(ctx, cfg, opts.Logger)
	if err != nil {
		return nil, nil, err
	}
	gw, err := clustergw.New(clustergw.Options{Discovery: disc, Keys: keys, Token: cfg.Cluster.Token,
		Version: opts.Version, Logger: opts.Logger,
		// E2B's SDKs through the gateway: the nodes' E2B domain, and their access tokens' secret.
		E2B: clustergw.E2BOptions{Domain: cfg.E2B.Domain, TokenSecret: auth.SandboxTokenSecret(opts.APIKey)}})
	if err != nil {
		return nil, nil, err
	}
	return newFrontDoors(gw, opts), gw, nil
}
