#!/usr/bin/env bash
# Installs agentbox as a system service, the way to run the daemon for a machine's users
# (scripts/up.sh stays the foreground mode for development). Idempotent: run it again after a
# pull to install the new binary and restart the service; the configuration and the key are kept.
#
#   - the group agentbox (a system group): its members can use the daemon;
#   - the binary in $PREFIX/bin/agentbox (PREFIX default /usr/local);
#   - /etc/agentbox/config.json (data_dir /var/lib/agentbox), written only when missing;
#   - /var/lib/agentbox (root:agentbox 0710) with the daemon's key api_key (root:agentbox 0640):
#     members of the group read it, and their CLI, Go client and Python SDK find it there when
#     they have no key of their own (AGENTBOX_API_KEY, ~/.cache/agentbox/api_key);
#   - the unit agentbox.service (scripts/agentbox.service), enabled and (re)started when systemd
#     runs this machine; the daemon runs as root, as the jail and gVisor need;
#   - the runtimes' artifacts in /var/lib/agentbox (`agentbox setup`, minutes the first time).
#
# The key makes its holder an admin of the daemon (every tenant, the key routes): the group
# agentbox is for the machine's trusted users, as the docker group is. Give others tenant keys
# with scopes (agentbox keys create, or POST /v1/keys).
#
# Environment:
#   DESTDIR=DIR          install the files under DIR instead of / (the group is still this
#                        machine's: the files' group must exist); no setup, no systemctl
#   PREFIX=DIR           where bin/agentbox goes (default /usr/local)
#   AGENTBOX_BIN=FILE    the binary to install (default: scripts/build.sh's bin/agentbox)
#   AGENTBOX_SKIP_SETUP=1  do not run `agentbox setup`
set -euo pipefail
cd "$(dirname "$0")/.."

destdir=${DESTDIR:-}
prefix=${PREFIX:-/usr/local}
group=agentbox
datadir=/var/lib/agentbox
confdir=/etc/agentbox
unitdir=/etc/systemd/system

say() { echo "install-system: $*"; }

if [ "$(id -u)" != 0 ]; then
	echo "install-system: run this as root (sudo $0): it creates a group, a service and files owned by root" >&2
	exit 1
fi
if [ -n "$destdir" ]; then
	destdir=$(realpath -m "$destdir")
fi

# The group whose members may use the daemon.
if ! getent group "$group" >/dev/null; then
	groupadd --system "$group"
	say "created the system group $group"
fi

# The binary, replaced by a rename so that a running daemon's file is never overwritten in place.
bin=${AGENTBOX_BIN:-}
if [ -z "$bin" ]; then
	scripts/host-deps.sh npm ca-certificates gcc libc6-dev e2fsprogs
	scripts/build.sh
	bin=bin/agentbox
fi
install -d -m 0755 "$destdir$prefix/bin"
install -m 0755 -o root -g root "$bin" "$destdir$prefix/bin/.agentbox.new"
mv -f "$destdir$prefix/bin/.agentbox.new" "$destdir$prefix/bin/agentbox"
say "installed $prefix/bin/agentbox"

# The configuration: written once, then the administrator's.
install -d -m 0755 "$destdir$confdir"
if [ -e "$destdir$confdir/config.json" ]; then
	say "kept $confdir/config.json"
else
	tmp=$(mktemp)
	printf '{\n  "data_dir": "%s"\n}\n' "$datadir" >"$tmp"
	install -m 0644 -o root -g root "$tmp" "$destdir$confdir/config.json"
	rm -f "$tmp"
	say "wrote $confdir/config.json (data_dir $datadir; the settings are in internal/config)"
fi

# The data directory: the group may reach api_key by name, not list or read the rest.
mkdir -p "$destdir$datadir"
chown root:"$group" "$destdir$datadir"
chmod 0710 "$destdir$datadir"

# The daemon's key, made here if missing (as the daemon would: abk_ and 32 random bytes,
# base64url), readable by the group. A key linked into place by a daemon that started meanwhile
# is kept.
key=$destdir$datadir/api_key
if [ ! -s "$key" ]; then
	rm -f "$key"
	tmp=$(mktemp "$destdir$datadir/.api_key-XXXXXX")
	printf 'abk_%s\n' "$(head -c 32 /dev/urandom | base64 -w0 | tr '+/' '-_' | tr -d '=')" >"$tmp"
	chown root:"$group" "$tmp"
	chmod 0640 "$tmp"
	ln "$tmp" "$key" 2>/dev/null || true
	rm -f "$tmp"
	say "made the daemon's key $datadir/api_key"
fi
chown root:"$group" "$key"
chmod 0640 "$key"

# The unit, naming the binary where it was installed.
install -d -m 0755 "$destdir$unitdir"
tmp=$(mktemp)
sed "s|/usr/local/bin/agentbox|$prefix/bin/agentbox|g" scripts/agentbox.service >"$tmp"
install -m 0644 -o root -g root "$tmp" "$destdir$unitdir/agentbox.service"
rm -f "$tmp"
say "installed $unitdir/agentbox.service"

if [ -n "$destdir" ]; then
	say "staged under $destdir (no setup, no systemctl)"
	exit 0
fi

if [ "${AGENTBOX_SKIP_SETUP:-}" != 1 ]; then
	say "preparing the runtimes in $datadir (agentbox setup; minutes the first time)"
	"$prefix/bin/agentbox" setup --config "$confdir/config.json"
fi

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload
	systemctl enable --quiet agentbox.service
	systemctl restart agentbox.service
	say "agentbox.service is enabled and running (systemctl status agentbox; journalctl -u agentbox)"
else
	say "systemd does not run this machine: start the daemon with"
	say "  $prefix/bin/agentbox serve --config $confdir/config.json"
fi
say "let a user in: usermod -aG $group USER (it takes effect at their next login)"
