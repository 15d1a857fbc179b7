package config

import (
	"fmt"
	"net/url"
	"strings"

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
		if c.StoreURL() == "" {
			return fmt.Errorf("config: a node needs the storage all nodes share: --shared-dir DIR or --store s3://BUCKET/PREFIX (or AGENTBOX_SHARED_DIR, AGENTBOX_STORE)")
		}
		if _, _, ok, err := c.S3Bucket(); ok && err != nil {
			return err
		} else if ok && c.S3.Endpoint == "" {
			return fmt.Errorf("config: store %s needs the S3 server's endpoint: cluster.s3.endpoint (or AGENTBOX_S3_ENDPOINT), e.g. https://s3.eu-west-1.amazonaws.com", c.StoreURL())
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

// S3Config says how a node reaches the bucket of an s3:// store. The credentials come from the
// file when one is named, else from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN); never from the configuration file itself.
type S3Config struct {
	// Endpoint is the server's base URL (https://s3.eu-west-1.amazonaws.com,
	// http://seaweedfs:8333) (AGENTBOX_S3_ENDPOINT).
	Endpoint string `json:"endpoint"`
	// Region signs the requests; default us-east-1 (AGENTBOX_S3_REGION).
	Region string `json:"region"`
	// PathStyle addresses the bucket as ENDPOINT/BUCKET rather than BUCKET.HOST: most
	// self-hosted servers need it (AGENTBOX_S3_PATH_STYLE=1).
	PathStyle bool `json:"path_style"`
	// CredentialsFile is an AWS shared-credentials file ([default] aws_access_key_id = ...,
	// aws_secret_access_key = ..., optional aws_session_token = ...), such as a mounted Secret
	// (AGENTBOX_S3_CREDENTIALS_FILE).
	CredentialsFile string `json:"credentials_file"`
}

// StoreURL is the shared store a node uses: Store, else SharedDir.
func (c ClusterConfig) StoreURL() string {
	if c.Store != "" {
		return c.Store
	}
	return c.SharedDir
}

// S3Bucket splits an s3:// store into its bucket and prefix; ok says the store is one.
func (c ClusterConfig) S3Bucket() (bucket, prefix string, ok bool, err error) {
	u := c.StoreURL()
	if !strings.HasPrefix(u, "s3://") {
		return "", "", false, nil
	}
	bucket, prefix, _ = strings.Cut(strings.TrimPrefix(u, "s3://"), "/")
	if bucket == "" {
		return "", "", true, fmt.Errorf("config: store %q names no bucket (s3://BUCKET/PREFIX)", u)
	}
	return bucket, strings.Trim(prefix, "/"), true, nil
}
