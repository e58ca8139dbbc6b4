-- set_fenced writes a value to a resource guarded by a fenced lock, unless
-- a writer with a higher fencing token got there first: the resource's own
-- check that keeps a holder who lost the lock without knowing it (a long
-- pause, a partition) from overwriting its successor's work.
--
-- KEYS[1]  the resource key
-- KEYS[2]  where the highest fencing token accepted for it is kept
-- ARGV[1]  the value to write
-- ARGV[2]  the writer's fencing token, a decimal integer below 2^53
--
-- Equal tokens are accepted: one holder may write several times.
--
-- Returns 1 when written, 0 when refused as stale.
local highest = redis.call("GET", KEYS[2])
if highest and tonumber(highest) > tonumber(ARGV[2]) then
	return 0
end
redis.call("SET", KEYS[1], ARGV[1])
redis.call("SET", KEYS[2], ARGV[2])
return 1
