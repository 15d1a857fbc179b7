#!/usr/bin/env bash
# A real single-node Kubernetes on this machine, for the cluster tests and for trying deploy/k8s:
# etcd, kube-apiserver (with certificates it generates), kube-scheduler, kube-controller-manager,
# kubelet and containerd (runc by default, gVisor as RuntimeClass "runsc"), pods on a CNI bridge.
#
#   scripts/cluster/kube-local.sh up   [DIR]   start it (idempotent), print `export KUBECONFIG=...`
#   scripts/cluster/kube-local.sh down [DIR]   stop everything it started and clean up (idempotent)
#   scripts/cluster/kube-local.sh import ARCHIVE [DIR]   import an image archive into its containerd
#
# DIR (default /tmp/agentbox-kube) holds its state, logs (DIR/logs) and DIR/kubeconfig. The
# binaries come from scripts/cluster/kube-build.sh (cached). One such cluster per machine: the
# kubelet owns machine-wide things (ports, cgroups), so a second `up` in another DIR is refused.
#
# Addresses come from the benchmarking range 198.18.0.0/15, on a bridge it makes and removes
# (agbk8s0): the node's address 198.18.1.1 (kubelet refuses a loopback node IP), which is also the
# pods' gateway, the pods in 198.18.1.0/24; Service IPs are 198.19.0.0/24. There is no kube-proxy, so Service
# IPs do not route: pods that talk to the API server get KUBERNETES_SERVICE_HOST=198.18.1.1
# (`kube-local.sh env` prints the values) and clients use pod IPs from the EndpointSlices.
#
# This host's root lacks CAP_SYS_RESOURCE: containerd sets restrict_oom_score_adj and the gVisor
# shim is built patched (kube-build.sh). Every wait and every delete has a timeout.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cmd=${1:-}
case "$cmd" in
up | down | env) dir=${2:-/tmp/agentbox-kube} ;;
import) archive=${2:?usage: kube-local.sh import ARCHIVE [DIR]}; dir=${3:-/tmp/agentbox-kube} ;;
*) echo "usage: kube-local.sh up|down|env [DIR] | import ARCHIVE [DIR]" >&2; exit 2 ;;
esac
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

node_ip=198.18.1.1
node_name=agentbox-kube
bridge=agbk8s0
pod_cidr=198.18.1.0/24
service_cidr=198.19.0.0/24
api_port=16443
etcd_port=23379
kubelet_port=10350
cgroup_root=/agentbox-kube
sock=$dir/containerd/containerd.sock
lockfile=/run/agentbox-kube.lock
ownerfile=/run/agentbox-kube.dir
log() { echo "kube-local: $*" >&2; }

bins() { bin=$("$root/scripts/cluster/kube-build.sh"); export PATH="$bin:$PATH"; }
kc() { timeout 60 "$bin/kubectl" --kubeconfig "$dir/kubeconfig" "$@"; }
ctr_() { timeout 120 "$bin/ctr" --address "$sock" -n k8s.io "$@"; }

# wait_for SECONDS WHAT COMMAND...: polls until COMMAND succeeds, or fails naming WHAT and the log.
wait_for() {
	local secs=$1 what=$2
	shift 2
	local end=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		if [ $SECONDS -ge $end ]; then
			log "$what not ready after ${secs}s; last lines of its log:"
			tail -n 20 "$dir/logs/$what.log" >&2 || true
			return 1
		fi
		sleep 0.2
	done
}

# start NAME COMMAND...: runs COMMAND in the background, logging to DIR/logs/NAME.log, its pid in
# DIR/pids/NAME. Already running: nothing.
start() {
	local name=$1
	shift
	if [ -f "$dir/pids/$name" ] && kill -0 "$(cat "$dir/pids/$name")" 2>/dev/null; then return 0; fi
	setsid "$@" >>"$dir/logs/$name.log" 2>&1 </dev/null 8>&- &
	echo $! >"$dir/pids/$name"
}

stop() {
	local name=$1 pid
	[ -f "$dir/pids/$name" ] || return 0
	pid=$(cat "$dir/pids/$name")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$dir/pids/$name"
}

certs() {
	local p=$dir/pki
	[ -f "$p/done" ] && return 0
	mkdir -p "$p"
	(
		cd "$p"
		openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=agentbox-kube-ca" 2>/dev/null
		cat >san.cnf <<EOF
[ext]
subjectAltName = IP:$node_ip, IP:127.0.0.1, IP:${service_cidr%.0/24}.1, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.cluster.local, DNS:localhost
extendedKeyUsage = serverAuth
EOF
		printf '[ext]\nextendedKeyUsage = clientAuth\n' >client.cnf
		cert() { # name subject extfile
			openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
			openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 3650 -extfile "$3" -extensions ext 2>/dev/null
		}
		cert apiserver "/CN=kube-apiserver" san.cnf
		cert admin "/O=system:masters/CN=agentbox-kube-admin" client.cnf
		openssl genrsa -out sa.key 2048 2>/dev/null
		openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
	)
	touch "$p/done"
}

kubeconfig() {
	local p=$dir/pki
	cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://$node_ip:$api_port", certificate-authority: "$p/ca.crt"}
users:
- name: admin
  user: {client-certificate: "$p/admin.crt", client-key: "$p/admin.key"}
contexts:
- name: local
  context: {cluster: local, user: admin}
current-context: local
EOF
}

network() {
	# The node's address is the pods' gateway on their bridge, made here (the CNI plugin finds the
	# address it wants there): no dummy interface, whose kernel module a container host may lack.
	ip link show "$bridge" >/dev/null 2>&1 || ip link add "$bridge" type bridge
	ip addr show dev "$bridge" | grep -q "$node_ip/" || ip addr add "$node_ip/24" dev "$bridge"
	ip link set "$bridge" up
	# Nothing for these addresses ever leaves the machine, even while the bridge is gone.
	ip route replace unreachable 198.18.0.0/15
	mkdir -p "$dir/cni/net.d" "$dir/cni/ipam"
	cat >"$dir/cni/net.d/10-agentbox.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "agentbox-kube", "plugins": [
  {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$dir/cni/ipam",
            "ranges": [[{"subnet": "$pod_cidr", "gateway": "$node_ip"}]]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
EOF
}

containerd_config() {
	mkdir -p "$dir/containerd"
	cat >"$dir/containerd/runsc.toml" <<EOF
binary_name = "$bin/runsc"
root = "$dir/containerd/runsc"
[runsc_config]
  platform = "systrap"
EOF
	cat >"$dir/containerd/config.toml" <<EOF
version = 3
root = "$dir/containerd/root"
state = "$dir/containerd/state"
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = 'registry.k8s.io/pause:3.10'
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = '$(command -v runc)'
        SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runsc]
      runtime_type = 'io.containerd.runsc.v1'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runsc.options]
        TypeUrl = 'io.containerd.runsc.v1.options'
        ConfigPath = '$dir/containerd/runsc.toml'
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['/usr/lib/cni']
    conf_dir = '$dir/cni/net.d'
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
  stream_server_port = '0'
EOF
}

kubelet_config() {
	mkdir -p "$dir/kubelet"
	cat >"$dir/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10348
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$dir/pki/ca.crt"}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: $cgroup_root
containerRuntimeEndpoint: unix://$sock
failSwapOn: false
resolvConf: ""
serializeImagePulls: false
imageGCHighThresholdPercent: 100
evictionHard: {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%"}
protectKernelDefaults: false
maxPods: 50
nodeStatusReportFrequency: 5s
EOF
}

# The sandbox ("pause") image, compiled from Kubernetes' own pause.c (the module build/pause/linux)
# with the host's gcc, static, and written as an image archive.
pause_image() {
	local cache=${AGENTBOX_KUBE_CACHE:-$root/.cache/kube} src work layer config
	local out=$cache/images/pause-3.10.tar
	if [ ! -f "$out" ]; then
		src=$(GONOSUMDB=k8s.io GOFLAGS=-mod=mod go mod download -json k8s.io/kubernetes@v1.32.4 | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
		work=$(mktemp -d)
		mkdir -p "$work/rootfs" "$work/archive" "$cache/images"
		gcc -Os -Wall -static -DVERSION=v3.10 -o "$work/rootfs/pause" "$src/build/pause/linux/pause.c"
		tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work/rootfs" -cf "$work/layer.tar" .
		layer=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
		printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$layer" >"$work/config.json"
		config=$(sha256sum "$work/config.json" | cut -d' ' -f1)
		mkdir -p "$work/archive/$layer"
		mv "$work/layer.tar" "$work/archive/$layer/layer.tar"
		mv "$work/config.json" "$work/archive/$config.json"
		printf '[{"Config":"%s.json","RepoTags":["registry.k8s.io/pause:3.10"],"Layers":["%s/layer.tar"]}]' "$config" "$layer" >"$work/archive/manifest.json"
		tar -C "$work/archive" -cf "$out.tmp" .
		mv "$out.tmp" "$out"
		rm -rf "$work"
	fi
	echo "$out"
}

# owner is the DIR of the cluster that holds the machine-wide parts (bridge, route, cgroups), if
# one is running; alive says whether a DIR's cluster still has a process.
owner() { cat "$ownerfile" 2>/dev/null || true; }
alive() {
	local f
	for f in "$1"/pids/*; do
		[ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && return 0
	done
	return 1
}

up() {
	# One cluster per machine: wait (bounded) while another DIR's cluster runs, e.g. a test of
	# another checkout; a dead one's leftovers are taken over.
	exec 8>"$lockfile"
	local end=$((SECONDS + ${AGENTBOX_KUBE_WAIT:-900})) o
	while :; do
		flock -w 60 8 || { log "cannot lock $lockfile"; exit 1; }
		o=$(owner)
		if [ -z "$o" ] || [ "$o" = "$dir" ] || ! alive "$o"; then break; fi
		flock -u 8
		[ $SECONDS -lt $end ] || { log "a local cluster is running in $o: run \`$0 down $o\` first"; exit 1; }
		sleep 5
	done
	echo "$dir" >"$ownerfile"
	bins
	mkdir -p "$dir/logs" "$dir/pids"
	local t0=$SECONDS
	certs
	kubeconfig
	network
	containerd_config
	kubelet_config
	for c in /sys/fs/cgroup/*/; do
		[ -d "$c" ] && [ ! -L "${c%/}" ] && mkdir -p "$c${cgroup_root#/}" 2>/dev/null || true
	done

	start etcd etcd --name agentbox-kube --data-dir "$dir/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
		--listen-peer-urls "http://127.0.0.1:$((etcd_port + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((etcd_port + 1))" \
		--initial-cluster "agentbox-kube=http://127.0.0.1:$((etcd_port + 1))"
	start containerd env PATH="$bin:$PATH" containerd --config "$dir/containerd/config.toml"
	wait_for 30 etcd curl -fsS "http://127.0.0.1:$etcd_port/health"

	local p=$dir/pki
	start kube-apiserver kube-apiserver --etcd-servers "http://127.0.0.1:$etcd_port" \
		--bind-address "$node_ip" --advertise-address "$node_ip" --secure-port "$api_port" \
		--service-cluster-ip-range "$service_cidr" --allow-privileged=true \
		--client-ca-file "$p/ca.crt" --tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" \
		--kubelet-client-certificate "$p/admin.crt" --kubelet-client-key "$p/admin.key" \
		--service-account-key-file "$p/sa.pub" --service-account-signing-key-file "$p/sa.key" \
		--service-account-issuer https://kubernetes.default.svc --authorization-mode Node,RBAC \
		--kubelet-preferred-address-types InternalIP \
		--enable-priority-and-fairness=false --profiling=false
	wait_for 60 kube-apiserver kc get --raw /readyz

	start kube-controller-manager kube-controller-manager --kubeconfig "$dir/kubeconfig" \
		--leader-elect=false --bind-address 127.0.0.1 --secure-port 10357 \
		--service-account-private-key-file "$p/sa.key" --root-ca-file "$p/ca.crt" \
		--use-service-account-credentials=false --cluster-cidr "$pod_cidr" \
		--controllers '*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route' \
		--node-monitor-grace-period 10s --profiling=false
	start kube-scheduler kube-scheduler --kubeconfig "$dir/kubeconfig" --leader-elect=false \
		--bind-address 127.0.0.1 --secure-port 10359 --profiling=false
	wait_for 30 containerd test -S "$sock"
	# Images the node cannot pull: the sandbox image, then whatever the caller imports.
	ctr_ images import --no-unpack=false "$(pause_image)" >/dev/null
	start kubelet kubelet --config "$dir/kubelet/config.yaml" --kubeconfig "$dir/kubeconfig" \
		--root-dir "$dir/kubelet/root" --hostname-override "$node_name" --node-ip "$node_ip" \
		--cert-dir "$dir/kubelet/pki"
	wait_for 90 kubelet sh -c "$bin/kubectl --kubeconfig $dir/kubeconfig get node $node_name -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
	# The RuntimeClass that puts a pod in gVisor (deploy/k8s runs the gateway there when asked).
	kc apply -f - >/dev/null <<EOF
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: runsc}
handler: runsc
EOF
	wait_for 60 kube-controller-manager kc -n default get serviceaccount default
	flock -u 8
	log "up in $((SECONDS - t0))s: node $node_name ($node_ip) Ready; logs in $dir/logs"
	echo "export KUBECONFIG=$dir/kubeconfig"
}

env_() {
	echo "export KUBECONFIG=$dir/kubeconfig"
	echo "KUBERNETES_SERVICE_HOST=$node_ip"
	echo "KUBERNETES_SERVICE_PORT=$api_port"
}

import() {
	bins
	ctr_ images import "$archive" >&2
}

down() {
	local t0=$SECONDS
	bin=$("$root/scripts/cluster/kube-build.sh" 2>/dev/null) || bin=
	if [ -n "$bin" ] && [ -f "$dir/pids/kube-apiserver" ] && kill -0 "$(cat "$dir/pids/kube-apiserver")" 2>/dev/null; then
		# Let the kubelet stop the pods while it still can; bounded, then force.
		for ns in $(kc get ns -o name 2>/dev/null | sed 's#namespace/##' | grep -vx 'kube-system\|kube-public\|kube-node-lease\|default' || true); do
			kc delete ns "$ns" --wait=false >/dev/null 2>&1 || true
		done
		kc delete pods --all -A --grace-period=1 --timeout=30s >/dev/null 2>&1 || true
	fi
	stop kubelet
	stop kube-scheduler
	stop kube-controller-manager
	# Containers left running: kill them through containerd, then their shims.
	if [ -S "$sock" ] && [ -n "$bin" ]; then
		for t in $(ctr_ tasks ls -q 2>/dev/null || true); do
			ctr_ tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
		done
		sleep 0.5
		for t in $(ctr_ tasks ls -q 2>/dev/null || true); do
			ctr_ tasks delete -f "$t" >/dev/null 2>&1 || true
		done
	fi
	stop containerd
	# Shims of this containerd (their command line names its socket) outlive it: end them by pid.
	for pid in $(pgrep -f -- "-address $sock" || true); do kill -KILL "$pid" 2>/dev/null || true; done
	stop kube-apiserver
	stop etcd
	# Mounts under DIR (pods' volumes, rootfs, shm, netns), deepest first.
	for _ in 1 2 3; do
		{ grep -o " $dir/[^ ]*" /proc/self/mounts || true; } | sort -r | while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
	done
	rm -rf "$dir/cni/ipam"
	# The machine-wide parts belong to the cluster that owns them: another DIR's stay.
	exec 8>"$lockfile"
	flock -w 60 8 || true
	local o
	o=$(owner)
	if [ -z "$o" ] || [ "$o" = "$dir" ]; then
		ip link del "$bridge" 2>/dev/null || true
		ip route del unreachable 198.18.0.0/15 2>/dev/null || true
		for c in /sys/fs/cgroup/*/"${cgroup_root#/}"; do
			[ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true
		done
		rm -f "$ownerfile"
	else
		log "the bridge and cgroups belong to the cluster in $o: left alone"
	fi
	log "down in $((SECONDS - t0))s"
}

case "$cmd" in
up) up ;;
down) down ;;
env) env_ ;;
import) import ;;
esac
