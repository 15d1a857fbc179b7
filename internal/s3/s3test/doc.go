// Package s3test gives tests a real S3-compatible server: SeaweedFS (package s3local), built
// once per machine by scripts/cluster/seaweedfs-build.sh and started once per test binary; each
// test makes its own bucket.
package s3test
