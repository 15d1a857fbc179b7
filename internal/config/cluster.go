package config

import (
	"fmt"
	"net/url"

	"github.com/agentbox-dev/agentbox/internal/cluster"
)

// validate checks the cluster settings once at start, naming what is missing for the role.
func (c ClusterConfig) validate() error {
	switch c.Role {
	case RoleSingle:
		return nil
	case RoleNode:
		if c.NodeID == "" {
			return fmt.Errorf("config: a node needs an id: --node-id ID (or AGENTBOX_NODE_ID)")
		}
		if err := cluster.ValidNodeID(c.NodeID); err != nil {
			return fmt.Errorf("config: %w", err)
		}
		if c.SharedDir == "" {
			return fmt.Errorf("config: a node needs the storage all nodes share: --shared-dir DIR (or AGENTBOX_SHARED_DIR)")
		}
		if c.Advertise != "" {
			if u, err := url.Parse(c.Advertise); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("config: advertise %q is not an http(s) base URL (e.g. http://10.0.0.5:8421)", c.Advertise)
			}
		}
		return nil
	case RoleGateway:
		if c.Discovery == "" {
			return fmt.Errorf("config: a gateway needs to find its nodes: --discovery static:n1=URL,n2=URL | nomad:SERVICE | kube:NAMESPACE/SERVICE (or AGENTBOX_DISCOVERY)")
		}
		return nil
	}
	return fmt.Errorf("config: role %q is not one of node, gateway (or empty for a single machine)", c.Role)
}
