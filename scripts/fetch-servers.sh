#!/usr/bin/env bash
# Fetches the servers of the test matrix and prints where they are:
# Redis 7.0 (Debian 12), Redis 8.6 (experimental), Valkey 8.0 (bookworm
# backports), Valkey 8.1 (trixie) and Valkey 9.1 (sid), each from Debian's
# archive, unpacked with dpkg-deb -x (nothing is installed on the system).
#
# Usage: scripts/fetch-servers.sh [DIR]   (default: $REDLOCK_SERVERS_DIR, else
# .servers/ at the top of the repository, which git ignores)
#
# The newer builds need glibc 2.38 or later, which Debian 12 lacks: every
# server runs through trixie's own loader and libraries, unpacked beside it.
# DIR/bin/<server>-<version> (redis-7.0, redis-8.6, valkey-8.0, valkey-8.1,
# valkey-9.1) is a launcher that takes redis-server's arguments; DIR/servers
# lists the launchers, one per line. apt-get runs with a private
# configuration (its own sources, lists and cache under DIR/apt): the
# system's apt state is not touched. A DIR that has every launcher is used
# as it is, with no network.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-${REDLOCK_SERVERS_DIR:-$here/../.servers}}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

log() { printf 'fetch-servers: %s\n' "$*" >&2; }

# server  suite: each server from the suite that has the version the
# matrix wants (the suite's current build of it: security updates replace
# older builds in the archive). A launcher is named after the version the
# suite has (redis-8.6): when a suite moves on, so does the name.
matrix=(
	"redis bookworm"
	"redis experimental"
	"valkey bookworm-backports"
	"valkey trixie"
	"valkey sid"
)
# The libraries the servers link, from trixie (glibc 2.41).
libs=(libc6 libstdc++6 libgcc-s1 libatomic1 libssl3t64 libjemalloc2 liblzf1 libsystemd0 libcap2 zlib1g)

complete() {
	[[ -s "$dir/servers" ]] || return 1
	[[ $(wc -l <"$dir/servers") -eq ${#matrix[@]} ]] || return 1
	local bin
	while read -r bin; do
		[[ -x "$bin" ]] || return 1
	done <"$dir/servers"
}

if complete; then
	printf '%s\n' "$dir/servers"
	exit 0
fi

apt_dir="$dir/apt"
rm -rf "$apt_dir"
mkdir -p "$apt_dir"/{lists/partial,cache/archives/partial,prefs,debs}
key=/usr/share/keyrings/debian-archive-keyring.gpg
{
	for suite in bookworm bookworm-backports trixie sid experimental; do
		echo "deb [signed-by=$key] http://deb.debian.org/debian $suite main"
	done
} >"$apt_dir/sources.list"
cat >"$apt_dir/apt.conf" <<EOF
Dir::Etc::SourceList "$apt_dir/sources.list";
Dir::Etc::SourceParts "/nonexistent";
Dir::Etc::Preferences "/nonexistent";
Dir::Etc::PreferencesParts "$apt_dir/prefs";
Dir::State::Lists "$apt_dir/lists";
Dir::Cache "$apt_dir/cache";
Dir::State::status "/var/lib/dpkg/status";
APT::Architecture "amd64";
APT::Sandbox::User "root";
Acquire::Languages "none";
EOF
export APT_CONFIG="$apt_dir/apt.conf"
log "reading Debian's package lists (private apt state in $apt_dir)"
apt-get update -qq >/dev/null

pkgs=()
for entry in "${matrix[@]}"; do
	read -r prefix suite <<<"$entry"
	pkgs+=("$prefix-tools/$suite")
done
for lib in "${libs[@]}"; do
	pkgs+=("$lib/trixie")
done
log "downloading ${#pkgs[@]} packages"
(cd "$apt_dir/debs" && apt-get download -qq "${pkgs[@]}" >/dev/null)

rm -rf "$dir/lib" "$dir/bin" "$dir/dist"
mkdir -p "$dir/lib" "$dir/bin" "$dir/dist"
for lib in "${libs[@]}"; do
	dpkg-deb -x "$apt_dir/debs/${lib}_"*.deb "$dir/lib/root"
done
libpath="$dir/lib/root/usr/lib/x86_64-linux-gnu:$dir/lib/root/lib/x86_64-linux-gnu"
loader="$dir/lib/root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
[[ -e "$loader" ]] || loader="$dir/lib/root/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"

: >"$dir/servers"
for entry in "${matrix[@]}"; do
	read -r prefix suite <<<"$entry"
	version=$(apt-cache show "$prefix-tools/$suite" | sed -n 's/^Version: //p' | head -1)
	ver="${version#*:}"                              # 7.0.15-1~deb12u7
	name="$prefix-$(cut -d. -f1,2 <<<"$ver")"        # redis-7.0
	deb=""
	for f in "$apt_dir/debs/${prefix}-tools_"*.deb; do
		[[ "$(dpkg-deb -f "$f" Version)" == "$version" ]] && deb="$f"
	done
	[[ -n "$deb" ]] || { log "no package $prefix-tools $version downloaded"; exit 1; }
	dpkg-deb -x "$deb" "$dir/dist/$name"
	# The server is the check-rdb binary started under the server's name.
	cat >"$dir/bin/$name" <<EOF
#!/bin/sh
# $name ($prefix $version from Debian $suite), through trixie's loader.
exec "$loader" --library-path "$libpath" --argv0 $prefix-server "$dir/dist/$name/usr/bin/$prefix-check-rdb" "\$@"
EOF
	chmod +x "$dir/bin/$name"
	if ! out=$("$dir/bin/$name" --version 2>&1); then
		log "$name does not start: $out"
		exit 1
	fi
	log "$name: $out"
	echo "$dir/bin/$name" >>"$dir/servers"
done
rm -rf "$apt_dir/debs" "$apt_dir/cache"
printf '%s\n' "$dir/servers"
