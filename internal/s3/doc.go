// Package s3 is a small client of the S3 API on the standard library, for the cluster's shared
// store (package sharedstore): AWS Signature Version 4, GET/HEAD/PUT/DELETE of objects,
// ListObjectsV2, conditional writes (If-None-Match: * and If-Match: ETAG, which S3 and the
// major compatible servers honour atomically: the fencing of session ownership rests on them),
// and uploads streamed from a file (one PUT, or a multipart upload for a file beyond the part
// size), so that a checkpoint of gigabytes never sits in memory. It sends a request again
// after a 500, 502, 503 or 504 or a lost connection, as S3 asks clients to (client.go,
// "Retries"), and settles a conditional write whose retry found its own earlier attempt by
// reading the object back.
//
// Why not an SDK: the store needs these few calls and exact control of their conditional
// headers; aws-sdk-go-v2's S3 module or minio-go would bring a dozen modules into every binary
// for them (docs/RATIONALE.md). The client is tested against a real S3-compatible server
// (SeaweedFS, built from its Go module by scripts/cluster/seaweedfs-build.sh).
package s3
