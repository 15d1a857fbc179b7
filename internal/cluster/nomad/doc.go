// Package nomad finds agentbox nodes through Nomad's own service discovery: the nodes' system
// job (deploy/nomad) registers a Nomad service (provider "nomad") with an HTTP check of the
// node's /v1/health, and the gateway lists that service's registrations with
// github.com/hashicorp/nomad/api. A node is healthy when every Nomad check of its registration
// passes (the check is the node answering, so the health comes from the engine and from the
// node); a registration whose checks fail, or whose Nomad client cannot be asked, is listed
// unhealthy, and the gateway routes around it.
//
// It is the `nomad:SERVICE` discovery kind (`agentbox serve --role gateway --discovery
// nomad:agentbox-node`). The Nomad address, token, namespace, region and TLS files come from
// Nomad's usual environment (NOMAD_ADDR, NOMAD_TOKEN, NOMAD_NAMESPACE, NOMAD_REGION,
// NOMAD_CACERT...), which a task Nomad starts already has.
//
// A node's id is the registration's tag "agentbox-node=ID" when it has one, else its Nomad
// client's node id without the dashes (32 hex digits): the job file sets AGENTBOX_NODE_ID the
// same way, so a session id names a node that discovery finds.
package nomad
