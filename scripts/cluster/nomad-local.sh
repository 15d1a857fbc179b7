#!/usr/bin/env bash
# A real Nomad cluster on this one machine, for tests and for trying deploy/nomad: one server
# and two client agents (c1, c2) with the raw_exec driver, all on 127.0.0.1.
#
#   scripts/cluster/nomad-local.sh up DIR     start it (or find it running), print NOMAD_ADDR=...
#   scripts/cluster/nomad-local.sh down DIR   stop its jobs, then the clients, then the server
#
# DIR holds everything the agents own (configs, state, alloc dirs, logs, pids, TMPDIR); `up`
# writes DIR/env (NOMAD_ADDR=...) and is ready when both clients are ready with a healthy
# raw_exec. Every wait is bounded (NOMAD_LOCAL_TIMEOUT seconds, default 90); on a timeout the
# script says what it waited for, prints the agents' last log lines and exits 1 (call `down`).
# NOMAD is the binary (default: scripts/cluster/nomad-build.sh builds or finds it). Must run as
# root: the clients run agentbox, whose sandboxes need root, as their own user.
#
# The traps this avoids (see shared notes): the AWS fingerprinter makes an agent exit when
# AWS_CA_BUNDLE is set, so agents start without it; each agent has its own TMPDIR, ports, state
# and alloc dirs, and advertises 127.0.0.1; the two clients hand out disjoint dynamic port
# ranges, since both think they own the same loopback address.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { sed -n '2,9p' "$0" >&2; exit 2; }
timeout=${NOMAD_LOCAL_TIMEOUT:-90}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
agents="server c1 c2"

# running PID: the process exists and is not a zombie. An agent killed from outside (the tests
# kill a client to play a machine that died) stays a zombie until this machine's init reaps it,
# which can take minutes; `kill -0` alone would call it alive and `up` would not restart it.
running() { kill -0 "$1" 2>/dev/null && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
alive() { [ -f "$dir/$1.pid" ] && running "$(cat "$dir/$1.pid")"; }
nomad_bin() {
	if [ -n "${NOMAD:-}" ]; then echo "$NOMAD"; elif [ -f "$dir/nomad-bin" ]; then cat "$dir/nomad-bin"; else "$here/nomad-build.sh"; fi
}
logs() { for a in $agents; do [ -f "$dir/$a.log" ] && { echo "--- $a.log (last 20 lines)"; tail -n 20 "$dir/$a.log"; }; done >&2; }

# wait_for DESCRIPTION COMMAND...: runs COMMAND every 0.25 s until it succeeds, at most $timeout s.
wait_for() {
	local what=$1 deadline=$((SECONDS + timeout))
	shift
	until "$@" >/dev/null 2>&1; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "nomad-local: gave up after ${timeout}s waiting for $what" >&2
			logs
			return 1
		fi
		sleep 0.25
	done
}

# free_base picks B so that B..B+9 (the agents' ports) and B+100..B+1099 (the clients' dynamic
# ports) are free now. B+1099 stays below the kernel's ephemeral range (ip_local_port_range,
# 32768 by default), as Nomad's own default range does: a port there can be taken at any moment
# by an outgoing connection or a listener on port 0, and a node's task then fails to bind the
# port Nomad gave it.
free_base() {
	local b i lo
	lo=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
	for i in $(seq 1 30); do
		b=$(( (RANDOM % 12 + 20) * 1000 ))
		[ $((b + 1099)) -lt "$lo" ] || continue
		if [ -z "$(ss -Htan "( sport >= :$b and sport <= :$((b + 1099)) )" 2>/dev/null)" ]; then echo "$b"; return; fi
	done
	echo "nomad-local: found no free port range" >&2
	return 1
}

write_configs() {
	local b=$1 i=0 a
	cat >"$dir/server.hcl" <<HCL
name = "server"
data_dir = "$dir/server/data"
bind_addr = "127.0.0.1"
advertise {
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}
ports {
  http = $b
  rpc  = $((b + 1))
  serf = $((b + 2))
}
disable_update_check = true
server {
  enabled          = true
  bootstrap_expect = 1
}
client {
  enabled = false
}
HCL
	for a in c1 c2; do
		i=$((i + 1))
		cat >"$dir/$a.hcl" <<HCL
name = "$a"
data_dir = "$dir/$a/data"
bind_addr = "127.0.0.1"
advertise {
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}
ports {
  http = $((b + 3 * i))
  rpc  = $((b + 3 * i + 1))
  serf = $((b + 3 * i + 2))
}
disable_update_check = true
server {
  enabled = false
}
client {
  enabled           = true
  servers           = ["127.0.0.1:$((b + 1))"]
  state_dir         = "$dir/$a/state"
  alloc_dir         = "$dir/$a/alloc"
  network_interface = "lo"
  min_dynamic_port  = $((b + 100 + (i - 1) * 500))
  max_dynamic_port  = $((b + 599 + (i - 1) * 500))
}
plugin "raw_exec" {
  config {
    enabled = true
  }
}
HCL
	done
}

ready_clients() {
	local out
	out=$(NOMAD_ADDR=$addr "$nomad" node status -t '{{range .}}{{.Name}}={{.Status}}/{{with index .Drivers "raw_exec"}}{{.Healthy}}{{end}} {{end}}')
	[[ "$out" == *"c1=ready/true"* && "$out" == *"c2=ready/true"* ]]
}

up() {
	[ "$(id -u)" = 0 ] || { echo "nomad-local: run as root (the clients run agentbox's sandboxes)" >&2; exit 1; }
	nomad=$(nomad_bin)
	echo "$nomad" >"$dir/nomad-bin"
	if [ -f "$dir/env" ] && [ -f "$dir/server.hcl" ]; then
		# Again on the same DIR (an agent came back): the same ports, since the server's raft
		# state remembers its address.
		. "$dir/env"
		addr=$NOMAD_ADDR
	else
		local b
		b=$(free_base)
		write_configs "$b"
		addr=http://127.0.0.1:$b
		printf 'NOMAD_ADDR=%s\n' "$addr" >"$dir/env"
	fi
	for a in $agents; do
		alive "$a" && continue
		mkdir -p "$dir/$a/tmp"
		# setsid: the agents outlive this script and get no signal meant for its caller's group.
		env -u AWS_CA_BUNDLE TMPDIR="$dir/$a/tmp" setsid "$nomad" agent -config "$dir/$a.hcl" \
			>>"$dir/$a.log" 2>&1 </dev/null &
		echo $! >"$dir/$a.pid"
		if [ "$a" = server ]; then
			wait_for "the server's leader ($addr)" sh -c "curl -fsS $addr/v1/status/leader | grep -q :"
		fi
	done
	wait_for "clients c1 and c2 ready with raw_exec" ready_clients
	echo "NOMAD_ADDR=$addr"
}

# stop_agent NAME: SIGINT (a graceful leave), then SIGKILL after 15 s.
stop_agent() {
	alive "$1" || { rm -f "$dir/$1.pid"; return 0; }
	local pid i
	pid=$(cat "$dir/$1.pid")
	kill -INT "$pid" 2>/dev/null || true
	for i in $(seq 1 60); do running "$pid" || break; sleep 0.25; done
	kill -KILL "$pid" 2>/dev/null || true
	rm -f "$dir/$1.pid"
}

# running_allocs lists the allocations a live client still runs (or is starting), as
# ID@client=status; a dead client's allocations do not count: nothing will stop them.
running_allocs() {
	local up
	up=$(curl -fsS "$addr/v1/nodes" | jq -r '[.[] | select(.Status == "ready") | .ID] | join(" ")')
	curl -fsS "$addr/v1/allocations?namespace=*" |
		jq -r --arg up "$up" '.[] | select((.ClientStatus == "running" or .ClientStatus == "pending") and (.NodeID as $n | $up | split(" ") | index($n))) | "\(.ID[0:8])@\(.NodeName)=\(.ClientStatus)"'
}
no_running_allocs() { [ -z "$(running_allocs)" ]; }

down() {
	nomad=$(cat "$dir/nomad-bin" 2>/dev/null || echo nomad)
	if alive server && [ -f "$dir/env" ]; then
		. "$dir/env"
		addr=$NOMAD_ADDR
		# Jobs first, so the clients stop their tasks (and what those started) before they go.
		local jobs j
		jobs=$(curl -fsS "$addr/v1/jobs?namespace=*" | jq -r '.[] | "\(.ID)@\(.Namespace)"' || true)
		for j in $jobs; do
			curl -fsS -X DELETE "$addr/v1/job/${j%@*}?namespace=${j#*@}&purge=true" >/dev/null || true
		done
		if ! timeout=${NOMAD_LOCAL_STOP_TIMEOUT:-45} wait_for "the allocations to stop" no_running_allocs; then
			echo "nomad-local: still running: $(running_allocs | tr '\n' ' ')" >&2
		fi
	fi
	stop_agent c1
	stop_agent c2
	stop_agent server
	# Tasks outlive their client (raw_exec's executor keeps them for the client's restart): kill
	# what is left in the cgroups of this cluster's allocations (named by their ids, under
	# /nomad on cgroup v1 and nomad.slice on v2, whichever client made them).
	local alloc f
	for alloc in "$dir"/c1/alloc/*/ "$dir"/c2/alloc/*/; do
		alloc=$(basename "$alloc")
		[[ "$alloc" =~ ^[0-9a-f-]{36}$ ]] || continue
		for f in $(find /sys/fs/cgroup -path "*$alloc*" -name cgroup.procs 2>/dev/null); do
			xargs -r kill -KILL <"$f" 2>/dev/null || true
		done
	done
	# And the plugins a client starts per task, which a stopped (or killed) client leaves behind:
	# each task's `nomad executor` (it names a file under DIR) and its `nomad logmon` (~100 MB
	# each, naming nothing; it inherits the agent's TMPDIR, which is under DIR).
	local p
	for p in /proc/[0-9]*; do
		[ "${p#/proc/}" = $$ ] && continue
		if { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q "^[^ ]*nomad executor .*$dir/"; then
			kill -KILL "${p#/proc/}" 2>/dev/null || true
		elif { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q "^[^ ]*nomad logmon" &&
			{ tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -qx "TMPDIR=$dir/.*"; then
			kill -KILL "${p#/proc/}" 2>/dev/null || true
		fi
	done
	# A client mounts each task's secrets and private directories (tmpfs) and unmounts them only
	# when it collects the allocation: unmount what is left under DIR.
	grep -o " $dir/[^ ]*" /proc/mounts | sort -r | xargs -r umount -l 2>/dev/null || true
}

case "$cmd" in
up) up ;;
down) down ;;
*) echo "nomad-local: unknown command $cmd (up or down)" >&2; exit 2 ;;
esac
