#!/usr/bin/env bash
# Builds a minimal Redis image (FROM scratch) from Debian's redis-server
# package, so the integration tests need no registry.
# Usage: scripts/build-redis-image.sh TAG
set -euo pipefail
tag="${1:?usage: build-redis-image.sh TAG}"

log() { printf 'build-redis-image: %s\n' "$*" >&2; }
# shellcheck source=scripts/image-lib.sh
source "$(dirname "$0")/image-lib.sh"

if ! command -v redis-server >/dev/null 2>&1; then
	if [[ "$(id -u)" != 0 ]]; then
		log "redis-server is not installed and this is not root: install Debian's redis-server or set REDLOCK_REDIS_IMAGE"
		exit 1
	fi
	log "installing Debian's redis-server"
	apt-get update -q >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server >/dev/null
fi

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/usr/bin" "$ctx/etc/redis" "$ctx/data" "$ctx/tmp"
cp -L "$(command -v redis-server)" "$ctx/usr/bin/redis-server"
cp -L "$(command -v redis-cli)" "$ctx/usr/bin/redis-cli"
stage_binaries "$ctx" "$ctx/usr/bin/redis-server" "$ctx/usr/bin/redis-cli"
write_redis_conf "$ctx"
cat >"$ctx/Dockerfile" <<'DOCKER'
FROM scratch
COPY . /
WORKDIR /data
ENTRYPOINT ["/usr/bin/redis-server", "/etc/redis/redis.conf"]
DOCKER
log "building $tag"
DOCKER_BUILDKIT=0 docker build -q -t "$tag" "$ctx" >&2
