# Functions the image builders share (sourced, not run): staging binaries
# with the libraries they load, and the test nodes' redis.conf.

# stage_binaries CTX FILE...: copies into CTX, at their own paths, every
# library that ldd lists for each FILE (the ld-linux loader included), so
# that a FROM-scratch image can run them.
stage_binaries() {
	local ctx="$1" bin lib
	shift
	for bin in "$@"; do
		ldd "$bin" | grep -o '/[^ ]*' | while read -r lib; do
			mkdir -p "$ctx$(dirname "$lib")"
			cp -L "$lib" "$ctx$lib"
		done
	done
}

# write_redis_conf CTX: the test nodes' configuration, at
# CTX/etc/redis/redis.conf.
write_redis_conf() {
	mkdir -p "$1/etc/redis"
	cat >"$1/etc/redis/redis.conf" <<'CONF'
# Test nodes: no persistence unless a test asks for it on the command line.
bind 127.0.0.1
protected-mode no
daemonize no
dir /data
save ""
appendonly no
logfile ""
CONF
}
