-- fence records a new fencing token on a node and reports whether the
-- caller still holds the lock there. It is the second round trip of a
-- fenced acquisition: the token is one more than the highest counter the
-- acquisition read, and it counts only where the lock was still held when
-- it was written.
--
-- KEYS[1]  the lock name
-- KEYS[2]  the name's fencing counter (no expiry: it must outlive locks)
-- ARGV[1]  the caller's token (plain lock) or owner id (reentrant lock)
-- ARGV[2]  the new fencing token, a decimal integer below 2^53
-- ARGV[3]  "1" for a reentrant lock (a hash with the owner as field)
--
-- The counter only ever grows: it becomes ARGV[2] when lower, and is left
-- alone otherwise, whether or not the lock is still held.
--
-- Returns 1 when the lock holds the caller here, 0 when not.
local current = tonumber(redis.call("GET", KEYS[2]) or "0")
local token = tonumber(ARGV[2])
if current < token then
	redis.call("SET", KEYS[2], ARGV[2])
end
if ARGV[3] == "1" then
	if redis.call("TYPE", KEYS[1]).ok == "hash" and redis.call("HEXISTS", KEYS[1], ARGV[1]) == 1 then
		return 1
	end
	return 0
end
local v = stored(KEYS[1])
if type(v) == "table" then
	return v
end
if v == ARGV[1] then
	return 1
end
return 0
