#!/usr/bin/env bash
# Runs every test, as CI does: installs what the tests need, builds, runs `agentbox setup` so the
# real runtimes are there, then the Go tests and the Python SDK's tests. On CI (CI=true) a test
# that would skip because root, a runtime or an artifact is missing fails instead.
set -euo pipefail
cd "$(dirname "$0")/.."
# chromium: the web console's browser tests drive it with playwright-core (scripts/ui-tools.sh);
# fonts-dejavu-core: text in its screenshots (chromium only recommends fonts);
# e2fsprogs: mkfs.ext4 makes the named volumes (internal/volumes);
# dnsmasq-base: the resolver of the E2B SDK test (TestE2BSDK), which answers its test domain.
# curl, jq: scripts/cluster/nomad-local.sh talks to Nomad's HTTP API with them.
scripts/host-deps.sh npm ca-certificates gcc libc6-dev chromium fonts-dejavu-core e2fsprogs curl jq dnsmasq-base
scripts/build.sh
bin/agentbox setup
# The hosted MCP servers' tests run the node-mcp image (Node 22 and the reference MCP servers from
# npm); setup does not build it for everyone, the tests need it. Cached by its recipe's hash.
bin/agentbox image build node-mcp
# The Nomad cluster test (internal/cluster/nomad) runs Nomad built from its Go module: about 6.5
# minutes the first time on a machine (2 cores), then cached by version under the data directory.
# Exit 3 (the Go module proxy unreachable) leaves the test to skip, or to fail in CI.
scripts/cluster/nomad-build.sh >/dev/null || [ $? = 3 ]
# The Kubernetes test (internal/cluster/kube) runs a real single-node cluster: its binaries are
# built from their Go modules at pinned versions, cached by version (cold 10+ minutes); exit 3 as above.
scripts/cluster/kube-build.sh >/dev/null || [ $? = 3 ]
# The shared store's S3 tests (internal/s3, internal/sharedstore, the cluster move over S3) run a
# real S3-compatible server, SeaweedFS, built from its Go module and cached by version; exit 3 as above.
scripts/cluster/seaweedfs-build.sh >/dev/null || [ $? = 3 ]
if [ "${CI:-}" = true ] || [ "$(id -u)" = 0 ]; then
	export AGENTBOX_REQUIRE_PRIVILEGED=1
fi
# Vet and test the build that ships: wazero patched for guard-page memories (scripts/build.sh), so
# the nano engine, worker and runtime tests run its compiled code without bounds checks.
guard=$(scripts/wazero-guard.sh)
go vet $guard ./...
# One package at a time: several packages hold deadline promises (a run stops within 100 ms of its
# timeout), and two packages spinning sandboxes at once on a 2-core machine measure the machine,
# not the promise.
status=0
go test $guard -p 1 -count=1 -timeout 30m ./... "$@" || status=$?
# The Python SDK, installed as a user would and run against daemons its tests start. It runs even
# when a Go test failed, so one run reports both; the script fails if either did.
scripts/sdk-test.sh || status=$?
# The JavaScript SDK, with Node's own test runner, against daemons its tests start.
scripts/js-sdk-test.sh || status=$?
exit "$status"
