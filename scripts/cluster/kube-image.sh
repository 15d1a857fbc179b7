#!/usr/bin/env bash
# Builds the container image the Kubernetes manifests run (deploy/k8s: the agentbox nodes and the
# gateway) without a registry or an image builder, and prints the path of the image archive.
#
#   scripts/cluster/kube-image.sh [AGENTBOX_BINARY]   (default bin/agentbox, built if missing)
#
# The image is one layer: the agentbox binary, the few host tools a node runs (ip for the heavy
# tier's network namespaces, mount and mkfs.ext4 for volumes, sh/tr/tail for the entrypoint that
# turns the pod's name into a node id) and the shared libraries each of them links, found with
# ldd. The runtimes' artifacts (CPython WASI, runsc, the heavy images) are not in it: they are
# large and built per machine by `agentbox setup` into the data directory, which the node pods
# mount from their host.
#
# The archive is in docker-archive form (manifest.json, config, layer.tar), tagged
# agentbox.local/agentbox:dev, which containerd imports as is:
#   ctr -n k8s.io images import "$(scripts/cluster/kube-image.sh)"
# Pods use it with imagePullPolicy: Never. Cached by the layer's digest under
# $AGENTBOX_KUBE_CACHE or .cache/kube (outside git).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$root/bin/agentbox}
tag=${AGENTBOX_KUBE_IMAGE:-agentbox.local/agentbox:dev}
cache=${AGENTBOX_KUBE_CACHE:-$root/.cache/kube}
if [ ! -x "$bin" ] && [ $# -eq 0 ]; then "$root/scripts/build.sh"; fi
[ -x "$bin" ] || { echo "kube-image: $bin is not an executable" >&2; exit 1; }
mkdir -p "$cache/images"
work=$(mktemp -d "$cache/images/build.XXXXXX")
trap 'rm -rf "$work"' EXIT

rootfs=$work/rootfs
mkdir -p "$rootfs"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,tmp,var/lib/agentbox,etc,proc,sys,dev,run}
chmod 1777 "$rootfs/tmp"
# put FILE [DEST]: copies FILE (following links) and every library ldd says it loads.
put() {
	local src=$1 dst=${2:-$1} lib
	mkdir -p "$rootfs$(dirname "$dst")"
	cp -L "$src" "$rootfs$dst"
	for lib in $(ldd "$src" 2>/dev/null | grep -o '/[^ ]*' || true); do
		[ -e "$rootfs$lib" ] && continue
		mkdir -p "$rootfs$(dirname "$lib")"
		cp -L "$lib" "$rootfs$lib"
	done
}
put "$bin" /usr/local/bin/agentbox
for tool in sh tr tail; do put "$(command -v $tool)" "/bin/$tool"; done
put "$(command -v ip)" /sbin/ip
put "$(command -v mount)" /bin/mount
put "$(command -v umount)" /bin/umount
put "$(command -v mkfs.ext4)" /sbin/mkfs.ext4
echo 'root:x:0:0:root:/root:/bin/sh' >"$rootfs/etc/passwd"
echo 'root:x:0:' >"$rootfs/etc/group"
echo 'hosts: files dns' >"$rootfs/etc/nsswitch.conf"

# Reproducible layer: fixed owner and times, sorted names.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$rootfs" -cf "$work/layer.tar" .
layer=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
out=$cache/images/agentbox-$layer.tar
if [ ! -f "$out" ]; then
	cat >"$work/config.json" <<EOF
{"architecture":"amd64","os":"linux","created":"1970-01-01T00:00:00Z",
 "config":{"Entrypoint":["/usr/local/bin/agentbox"],"Env":["PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"WorkingDir":"/"},
 "rootfs":{"type":"layers","diff_ids":["sha256:$layer"]}}
EOF
	config=$(sha256sum "$work/config.json" | cut -d' ' -f1)
	mkdir -p "$work/archive/$layer"
	mv "$work/layer.tar" "$work/archive/$layer/layer.tar"
	mv "$work/config.json" "$work/archive/$config.json"
	printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]\n' "$config" "$tag" "$layer" >"$work/archive/manifest.json"
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work/archive" -cf "$out.tmp" .
	mv "$out.tmp" "$out"
	# Keep the three newest archives.
	ls -t "$cache"/images/agentbox-*.tar | tail -n +4 | xargs -r rm -f
fi
echo "$out"
