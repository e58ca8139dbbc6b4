-- sem_acquire takes one permit of a counting semaphore on this node: it
-- drops the permits that expired, then admits the caller if fewer than
-- ARGV[3] holders are left, or if the caller already holds one (the client
-- resent this request after losing the reply of a try that was applied).
--
-- KEYS[1]  the semaphore name: a sorted set of tokens scored by expiry
--          (see semaphore.lua, which scripts.go puts in front of this file)
-- KEYS[2]  the permit count kept beside the name; absent when a Redis
--          Cluster cannot keep it in the name's slot
-- ARGV[1]  the caller's token
-- ARGV[2]  the time to live, in milliseconds
-- ARGV[3]  the permit count
-- ARGV[4]  the least uptime, in whole seconds, at which this node may grant;
--          "0" for no check (see recovering in guard.lua)
--
-- Returns {status, n}, except for a grant:
--   time           granted (an integer, which costs the client less than
--                  an array): the caller holds a permit that expires ARGV[2]
--                  ms from now (re-armed when it already held one); the
--                  node's time in Unix milliseconds, the clock evidence the
--                  vote carries (see internal/node/clock.go)
--   { 0, holders}  refused: ARGV[3] holders hold a permit
--   {-1, uptime}   refused: the node has been up only `uptime` seconds
--   {-2, permits}  refused: live holders were admitted with another permit
--                  count, `permits`; two semaphores with different counts
--                  must not share a name
--   an error reply KEYS[1] holds something that is not a semaphore (see
--                  alienSemaphore)
local up = recovering(ARGV[4])
if up then
	return {-1, up}
end
local t = now()
if redis.call("PTTL", KEYS[1]) == -2 then
	-- No semaphore yet (or its last permit expired and the key with it):
	-- the caller's permit is the only one, and the last to expire.
	local ttl = tonumber(ARGV[2])
	redis.call("ZADD", KEYS[1], t + ttl, ARGV[1])
	redis.call("PEXPIRE", KEYS[1], ttl)
	if #KEYS > 1 then
		redis.call("SET", KEYS[2], ARGV[3], "PX", ttl)
	end
	return t
end
local bad = alienSemaphore(KEYS[1])
if bad then
	return bad
end
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", t)
local n = redis.call("ZCARD", KEYS[1])
if n > 0 and #KEYS > 1 then
	local permits = redis.call("GET", KEYS[2])
	if permits and permits ~= ARGV[3] then
		return {-2, permits}
	end
end
if not redis.call("ZSCORE", KEYS[1], ARGV[1]) then
	if n >= tonumber(ARGV[3]) then
		return {0, n}
	end
	n = n + 1
end
redis.call("ZADD", KEYS[1], t + tonumber(ARGV[2]), ARGV[1])
if #KEYS > 1 then
	redis.call("SET", KEYS[2], ARGV[3])
end
keep(t)
return t
