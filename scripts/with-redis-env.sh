#!/usr/bin/env bash
# Runs a command with everything the Redis harness needs: a Docker engine and
# a Redis image. Usage: scripts/with-redis-env.sh CMD [ARGS...]
#
# - Docker engine: used as is when `docker info` answers. Otherwise, when
#   running as root, Debian's docker.io is installed if missing and a private
#   dockerd is started (own data root and pidfile); it is stopped by its PID
#   when the command ends. Without root, the script says what to do and fails.
# - Redis image: $REDLOCK_REDIS_IMAGE when set (pulled if absent), else the
#   local image redlock-redis:7, built from Debian's redis-server package
#   when it does not exist yet (no registry is needed).
# - Redis image with a movable clock (tests of clock jumps):
#   $REDLOCK_FAKETIME_IMAGE, redlock-redis-faketime:7 when unset, built by
#   scripts/build-faketime-image.sh when it does not exist yet (it compiles
#   Redis once, about a minute, then reuses the binary). When it cannot be
#   built the variable is left unset and the script carries on: only the
#   tests that need it fail, saying so. REDLOCK_FAKETIME=skip leaves it out
#   (make demo and make bench, which never move a clock).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
state="${REDLOCK_STATE_DIR:-/tmp/redlock-docker}"
started_pid=""

log() { printf 'with-redis-env: %s\n' "$*" >&2; }

stop_engine() {
	if [[ -n "$started_pid" ]] && kill -0 "$started_pid" 2>/dev/null; then
		log "stopping the dockerd this script started (pid $started_pid)"
		kill "$started_pid" 2>/dev/null || true
		for _ in $(seq 1 100); do
			kill -0 "$started_pid" 2>/dev/null || break
			sleep 0.1
		done
	fi
}

ensure_engine() {
	if docker info >/dev/null 2>&1; then
		return
	fi
	if [[ "$(id -u)" != 0 ]]; then
		log "no Docker engine answers and this is not root: start Docker (or run as root so this script can install and start one)"
		exit 1
	fi
	if ! command -v dockerd >/dev/null 2>&1; then
		log "installing Debian's docker.io"
		apt-get update -q >/dev/null
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io >/dev/null
	fi
	mkdir -p "$state"
	log "starting dockerd (data root $state/data, log $state/dockerd.log)"
	dockerd --data-root "$state/data" --exec-root "$state/exec" \
		--pidfile "$state/dockerd.pid" --host "unix:///var/run/docker.sock" \
		>"$state/dockerd.log" 2>&1 &
	started_pid=$!
	trap stop_engine EXIT
	for _ in $(seq 1 150); do
		if docker info >/dev/null 2>&1; then
			return
		fi
		if ! kill -0 "$started_pid" 2>/dev/null; then
			log "dockerd exited; its log follows"
			cat "$state/dockerd.log" >&2
			exit 1
		fi
		sleep 0.2
	done
	log "dockerd did not answer within 30 s; its log follows"
	cat "$state/dockerd.log" >&2
	exit 1
}

ensure_image() {
	if [[ -n "${REDLOCK_REDIS_IMAGE:-}" ]]; then
		if ! docker image inspect "$REDLOCK_REDIS_IMAGE" >/dev/null 2>&1; then
			log "pulling $REDLOCK_REDIS_IMAGE"
			docker pull "$REDLOCK_REDIS_IMAGE" >&2
		fi
		return
	fi
	export REDLOCK_REDIS_IMAGE="redlock-redis:7"
	if docker image inspect "$REDLOCK_REDIS_IMAGE" >/dev/null 2>&1; then
		return
	fi
	"$here/build-redis-image.sh" "$REDLOCK_REDIS_IMAGE"
}

ensure_faketime_image() {
	local img="${REDLOCK_FAKETIME_IMAGE:-redlock-redis-faketime:7}"
	unset REDLOCK_FAKETIME_IMAGE
	if ! docker image inspect "$img" >/dev/null 2>&1; then
		log "building $img (scripts/build-faketime-image.sh)"
		if ! "$here/build-faketime-image.sh" "$img"; then
			log "could not build $img: tests that move a node's clock will fail"
			return
		fi
	fi
	export REDLOCK_FAKETIME_IMAGE="$img"
}

ensure_engine
ensure_image
if [[ "${REDLOCK_FAKETIME:-}" != skip ]]; then
	ensure_faketime_image
fi
# The harness runs Redis with host networking on 127.0.0.1. The reaper image
# cannot be pulled without a registry, and the override keeps testcontainers
# from dialling the default gateway when it believes it runs in a container.
export TESTCONTAINERS_RYUK_DISABLED=true
export TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1
"$@"
