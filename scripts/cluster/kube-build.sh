#!/usr/bin/env bash
# Builds what the local Kubernetes cluster (scripts/cluster/kube-local.sh) runs, every binary from
# its Go module at a pinned version (this machine reaches the Go module proxy and Debian, no
# release site), and prints the directory that holds them:
#
#   kube-apiserver kube-scheduler kube-controller-manager kubelet kubectl   k8s.io/kubernetes v1.32.4
#   containerd ctr containerd-shim-runc-v2                                  containerd v2.1.4
#   runsc containerd-shim-runsc-v1 (static)                                 gVisor, go.mod's pin
#
# and installs etcd (Debian's etcd-server), runc (the privileged agentbox node pods run under it),
# the CNI plugins (bridge, host-local, loopback, portmap) and iproute2 from Debian.
#
# Exits 3 when a module cannot be downloaded (the proxy is unreachable), 1 on any other failure.
# Idempotent: each part is cached by its version under $AGENTBOX_KUBE_CACHE or .cache/kube
# (outside git), so a second run prints the directory at once. Cold it takes 10+ minutes on 2
# cores (Kubernetes ~8, containerd ~2, the gVisor shim ~2).
#
# Traps this works around (../shared/notes/scale-out.md):
#   - k8s.io/kubernetes fails the checksum database: GONOSUMDB=k8s.io; a module requiring it needs
#     a replace to v0.32.x for each staging module its own go.mod replaces with ./staging/...
#   - containerd v2 refuses `go install` (exclude directives): copy the module and build it there.
#   - this host's root lacks CAP_SYS_RESOURCE and the gVisor shim fails setting its own OOM score:
#     the copy of gVisor's module is patched to ignore that error instead of failing.
#   - runsc and its shim must be static: a cgo runsc cannot re-exec itself after pivot_root.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
kube_version=${KUBE_VERSION:-v1.32.4}
containerd_version=${CONTAINERD_VERSION:-v2.1.4}
gvisor_version=$(cd "$root" && go list -m -f '{{.Version}}' gvisor.dev/gvisor)
cache=${AGENTBOX_KUBE_CACHE:-$root/.cache/kube}
shim_patch=2 # bump when the shim's patch (build_gvisor) changes, so the cache is rebuilt
out=$cache/bin-k8s-$kube_version-containerd-$containerd_version-gvisor-$gvisor_version-patch$shim_patch
mkdir -p "$cache"
export GOFLAGS="-mod=mod -buildvcs=false" GONOSUMDB=k8s.io GOTOOLCHAIN=local

log() { echo "kube-build: $*" >&2; }
moddir() { go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p'; }
copymod() { rm -rf "$2"; cp -r "$1" "$2"; chmod -R u+w "$2"; }

debian() {
	"$root/scripts/host-deps.sh" etcd-server runc containernetworking-plugins iproute2
}

# k8s.io/kubernetes: a throwaway module that requires it, with the staging modules replaced.
kube_dir=$cache/k8s-$kube_version
kube_ok() {
	for b in kube-apiserver kube-scheduler kube-controller-manager kubelet kubectl; do
		[ -x "$kube_dir/$b" ] || return 1
	done
	[ "$("$kube_dir/kubelet" --version 2>/dev/null)" = "Kubernetes $kube_version" ]
}
build_kube() {
	kube_ok && return 0
	local work start src minor staging
	start=$(date +%s)
	work=$(mktemp -d "$cache/build-k8s.XXXXXX")
	src=$(moddir "k8s.io/kubernetes@$kube_version")
	[ -f "$src/go.mod" ] || { log "download of k8s.io/kubernetes@$kube_version failed"; exit 3; }
	minor=${kube_version#v1.}
	staging=$(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\1#p' "$src/go.mod")
	[ -n "$staging" ] || { log "no staging replaces found in $src/go.mod"; return 1; }
	{
		echo "module agentbox.local/kubebuild"
		echo "go 1.23.0"
		echo "require k8s.io/kubernetes $kube_version"
		echo "replace ("
		for m in $staging; do echo "	$m => $m v0.$minor"; done
		echo ")"
	} >"$work/go.mod"
	log "building Kubernetes $kube_version (about 8 minutes cold on 2 cores; $(echo "$staging" | wc -l) staging modules replaced)"
	local pkg=k8s.io/component-base/version
	local ldflags="-s -w -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=${minor%%.*} -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
	ldflags="$ldflags -X k8s.io/client-go/pkg/version.gitVersion=$kube_version"
	(cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$work/bin/" \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler \
		k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubelet \
		k8s.io/kubernetes/cmd/kubectl)
	rm -rf "$kube_dir"
	mv "$work/bin" "$kube_dir"
	rm -rf "$work"
	kube_ok || { log "built kubelet does not report $kube_version"; return 1; }
	log "built Kubernetes $kube_version in $(($(date +%s) - start))s"
}

containerd_dir=$cache/containerd-$containerd_version
containerd_ok() {
	[ -x "$containerd_dir/ctr" ] && [ -x "$containerd_dir/containerd-shim-runc-v2" ] && [[ "$("$containerd_dir/containerd" --version 2>/dev/null)" == *" $containerd_version "* ]]
}
build_containerd() {
	containerd_ok && return 0
	local work start src
	start=$(date +%s)
	work=$(mktemp -d "$cache/build-containerd.XXXXXX")
	src=$(moddir "github.com/containerd/containerd/v2@$containerd_version")
	[ -f "$src/go.mod" ] || { log "download of containerd $containerd_version failed"; exit 3; }
	copymod "$src" "$work/src"
	log "building containerd $containerd_version (about 2 minutes cold)"
	(cd "$work/src" && CGO_ENABLED=0 go build -trimpath -tags no_btrfs \
		-ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$containerd_version" \
		-o "$work/bin/" ./cmd/containerd ./cmd/ctr ./cmd/containerd-shim-runc-v2)
	rm -rf "$containerd_dir"
	mv "$work/bin" "$containerd_dir"
	chmod -R u+w "$work"
	rm -rf "$work"
	containerd_ok || { log "built containerd does not report $containerd_version"; return 1; }
	log "built containerd $containerd_version in $(($(date +%s) - start))s"
}

gvisor_dir=$cache/gvisor-$gvisor_version-patch$shim_patch
gvisor_ok() {
	[ -x "$gvisor_dir/containerd-shim-runsc-v1" ] && [[ "$("$gvisor_dir/runsc" --version 2>/dev/null)" == *"$gvisor_version"* ]]
}
build_gvisor() {
	gvisor_ok && return 0
	local work start src f
	start=$(date +%s)
	work=$(mktemp -d "$cache/build-gvisor.XXXXXX")
	src=$(cd "$root" && go mod download -json "gvisor.dev/gvisor@$gvisor_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
	[ -f "$src/go.mod" ] || { log "download of gVisor $gvisor_version failed"; exit 3; }
	copymod "$src" "$work/src"
	f=$work/src/pkg/shim/v1/manager.go
	grep -q 'failed to set OOM Score on shim: %w' "$f" || { log "$f changed: the OOM-score patch no longer applies"; return 1; }
	# Without CAP_SYS_RESOURCE setting a negative OOM score fails: carry on, as runc's shim does
	# under containerd's restrict_oom_score_adj. Silently: containerd reads the bootstrap answer
	# from the output of `shim start`, stderr included, so a log line there breaks it.
	sed -i 's|return shim.BootstrapParams{}, fmt.Errorf("failed to set OOM Score on shim: %w", err)|_ = err // ignored: no CAP_SYS_RESOURCE (scripts/cluster/kube-build.sh)|' "$f"
	log "building static runsc and containerd-shim-runsc-v1 $gvisor_version (about 3 minutes cold)"
	(cd "$work/src" && CGO_ENABLED=0 go build -trimpath \
		-ldflags "-X gvisor.dev/gvisor/runsc/version.version=$gvisor_version" \
		-o "$work/bin/runsc" ./runsc &&
		CGO_ENABLED=0 go build -trimpath -o "$work/bin/containerd-shim-runsc-v1" ./shim)
	rm -rf "$gvisor_dir"
	mv "$work/bin" "$gvisor_dir"
	chmod -R u+w "$work"
	rm -rf "$work"
	gvisor_ok || { log "built runsc does not report $gvisor_version"; return 1; }
	log "built runsc and its shim in $(($(date +%s) - start))s"
}

all_ok() { kube_ok && containerd_ok && gvisor_ok && [ -d "$out" ]; }
debian # cheap when they are there (host-deps.sh asks dpkg, not apt)
if ! all_ok; then
	# One build at a time per cache (CI or two shells starting together wait for the first).
	exec 9>"$cache/.lock"
	flock 9
	build_gvisor
	build_containerd
	build_kube
	mkdir -p "$out.tmp"
	# Relative links: the cache may be reached through a symlink (a worktree's .cache).
	for f in "$kube_dir"/* "$containerd_dir"/* "$gvisor_dir"/*; do
		ln -sf "../$(basename "$(dirname "$f")")/$(basename "$f")" "$out.tmp/"
	done
	rm -rf "$out"
	mv "$out.tmp" "$out"
fi
echo "$out"
