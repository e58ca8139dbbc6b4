#!/usr/bin/env bash
# Builds a minimal Redis image (FROM scratch) whose wall clock a test can move
# while it runs: Redis built from Debian's redis source package without
# jemalloc, with Debian's libfaketime preloaded. libfaketime reads the offset
# from /clock/offset on every call ("+60", "-1.5"; a missing or empty file
# leaves the clock alone), so a test bind-mounts a host directory at /clock
# and rewrites the file there. Debian's own redis-server cannot be used:
# it is built with jemalloc, and libfaketime preloaded into it makes it
# abort at start ("Unexpected recursive calls to clock_gettime()").
# The monotonic clock is not faked: Redis's timers keep running.
#
# The built binaries are cached in $REDLOCK_STATE_DIR/faketime-build
# (/tmp/redlock-docker/faketime-build by default): only the first run
# compiles (about a minute on 2 cores).
# Usage: scripts/build-faketime-image.sh TAG
set -euo pipefail
tag="${1:?usage: build-faketime-image.sh TAG}"
state="${REDLOCK_STATE_DIR:-/tmp/redlock-docker}"
cache="$state/faketime-build"

log() { printf 'build-faketime-image: %s\n' "$*" >&2; }
# shellcheck source=scripts/image-lib.sh
source "$(dirname "$0")/image-lib.sh"

# ensure_packages PACKAGE...: installs those not installed yet (root only).
ensure_packages() {
	local missing=() p
	for p in "$@"; do
		if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]]; then
			missing+=("$p")
		fi
	done
	if [[ ${#missing[@]} -eq 0 ]]; then
		return
	fi
	if [[ "$(id -u)" != 0 ]]; then
		log "missing Debian packages (${missing[*]}) and this is not root: install them, or run as root"
		exit 1
	fi
	log "installing Debian packages: ${missing[*]}"
	mkdir -p "$state"
	if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"; } \
		</dev/null >"$state/faketime-apt.log" 2>&1; then
		log "apt-get failed; its log follows"
		cat "$state/faketime-apt.log" >&2
		exit 1
	fi
}

# build_redis: compiles redis-server and redis-cli from Debian's source
# package into $cache/bin. The apt lists for the deb-src entries are
# private to the build (the system's apt configuration is not changed).
build_redis() {
	ensure_packages build-essential
	mkdir -p "$cache"
	local work
	work="$(mktemp -d "$cache/work.XXXXXX")"
	# apt's download sandbox user (_apt) must be able to write there.
	chmod 755 "$work"
	trap 'rm -rf "$work"' EXIT
	mkdir -p "$work/apt/sources.list.d" "$work/apt/lists/partial" "$work/apt/cache" "$work/src"
	# The same mirrors as the system's, as deb-src entries.
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -e "$f" ]] || continue
		sed 's/^Types:.*/Types: deb-src/' "$f" >"$work/apt/sources.list.d/$(basename "$f")"
	done
	if [[ -f /etc/apt/sources.list ]]; then
		sed -n 's/^deb \(.*\)/deb-src \1/p' /etc/apt/sources.list >"$work/apt/sources.list"
	else
		: >"$work/apt/sources.list"
	fi
	local apt=(apt-get -q
		-o Dir::Etc::SourceList="$work/apt/sources.list"
		-o Dir::Etc::SourceParts="$work/apt/sources.list.d"
		-o Dir::State::Lists="$work/apt/lists"
		-o Dir::Cache="$work/apt/cache")
	log "fetching Debian's redis source package (deb-src lists private to this build)"
	"${apt[@]}" update </dev/null >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; exit 1; }
	(cd "$work/src" && "${apt[@]}" source redis </dev/null >>"$work/apt.log" 2>&1) || { cat "$work/apt.log" >&2; exit 1; }
	local src
	src="$(find "$work/src" -mindepth 1 -maxdepth 1 -type d -name 'redis-*' -print -quit)"
	if [[ -z "$src" ]]; then
		log "apt-get source redis unpacked no redis-* directory; its log follows"
		cat "$work/apt.log" >&2
		exit 1
	fi
	log "compiling $(basename "$src") with MALLOC=libc BUILD_TLS=no USE_SYSTEMD=no (about a minute; log $cache/make.log)"
	if ! make -C "$src" -j"$(nproc)" MALLOC=libc BUILD_TLS=no USE_SYSTEMD=no >"$cache/make.log" 2>&1; then
		log "make failed; the end of its log follows"
		tail -n 30 "$cache/make.log" >&2
		exit 1
	fi
	mkdir -p "$work/bin"
	cp "$src/src/redis-server" "$src/src/redis-cli" "$work/bin/"
	strip "$work/bin/redis-server" "$work/bin/redis-cli"
	rm -rf "$cache/bin"
	mv "$work/bin" "$cache/bin"
	rm -rf "$work"
	trap - EXIT
}

if [[ -x "$cache/bin/redis-server" && -x "$cache/bin/redis-cli" ]]; then
	log "using the redis-server built before ($cache/bin)"
else
	build_redis
fi
# A jemalloc build would crash under libfaketime: refuse it here rather
# than in every test.
version="$("$cache/bin/redis-server" --version)"
if [[ "$version" != *malloc=libc* ]]; then
	log "$cache/bin/redis-server is not built with MALLOC=libc; remove $cache and run again"
	exit 1
fi
log "$version"

ensure_packages faketime
faketime_lib="$(dpkg-query -L libfaketime | grep -m 1 '/libfaketime\.so\.1$' || true)"
if [[ -z "$faketime_lib" ]]; then
	log "libfaketime.so.1 not found in Debian's libfaketime package"
	exit 1
fi

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/usr/bin" "$ctx/usr/lib/faketime" "$ctx/etc/redis" "$ctx/data" "$ctx/tmp" "$ctx/clock"
cp "$cache/bin/redis-server" "$cache/bin/redis-cli" "$ctx/usr/bin/"
cp -L "$faketime_lib" "$ctx/usr/lib/faketime/libfaketime.so.1"
stage_binaries "$ctx" "$ctx/usr/bin/redis-server" "$ctx/usr/bin/redis-cli" "$ctx/usr/lib/faketime/libfaketime.so.1"
write_redis_conf "$ctx"
cat >"$ctx/Dockerfile" <<'DOCKER'
FROM scratch
COPY . /
WORKDIR /data
# The wall clock is the real one plus the offset in /clock/offset, re-read
# on every call; the monotonic clock is left alone.
ENV LD_PRELOAD=/usr/lib/faketime/libfaketime.so.1 \
    FAKETIME_TIMESTAMP_FILE=/clock/offset \
    FAKETIME_NO_CACHE=1 \
    FAKETIME_DONT_FAKE_MONOTONIC=1
ENTRYPOINT ["/usr/bin/redis-server", "/etc/redis/redis.conf"]
DOCKER
log "building $tag"
DOCKER_BUILDKIT=0 docker build -q -t "$tag" "$ctx" >&2
