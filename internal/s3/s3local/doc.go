// Package s3local runs SeaweedFS's S3-compatible server (`weed mini`, Apache-2.0, built from its
// Go module by scripts/cluster/seaweedfs-build.sh) on loopback ports of its own, with one
// identity whose request signatures it checks: for the shared store's tests (package s3test) and
// `agentbox bench cluster`'s move over S3.
package s3local
