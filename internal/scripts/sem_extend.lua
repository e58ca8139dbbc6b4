-- sem_extend re-arms the caller's permit of a counting semaphore, only if
-- it still holds one that has not expired. It never admits anyone: a
-- permit that expired or was dropped stays lost.
--
-- KEYS[1]  the semaphore name (see semaphore.lua, which scripts.go puts in
--          front of this file)
-- KEYS[2]  the permit count kept beside the name; may be absent
-- ARGV[1]  the caller's token
-- ARGV[2]  the new time to live, in milliseconds
--
-- Returns 1 when the permit was held and now expires ARGV[2] ms from now,
-- 0 otherwise, or an error reply when KEYS[1] holds something that is not a
-- semaphore.
local expiry, t = permit(ARGV[1])
if type(expiry) == "table" then
	return expiry
end
if not expiry or tonumber(expiry) <= t then
	return 0
end
redis.call("ZADD", KEYS[1], "XX", t + tonumber(ARGV[2]), ARGV[1])
keep(t)
return 1
