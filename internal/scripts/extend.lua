-- extend re-arms a lock's expiry only if it still holds the caller's token.
-- It never creates the key: a lock that expired or was taken stays lost.
--
-- KEYS[1]  the lock name
-- ARGV[1]  the caller's token
-- ARGV[2]  the new time to live, in milliseconds
--
-- Returns 1 when the key held ARGV[1] and its expiry was set, 0 otherwise
-- (a key of another type is not the caller's), or an error reply when GET
-- failed otherwise.
local v = stored(KEYS[1])
if type(v) == "table" then
	return v
end
if v == ARGV[1] then
	return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0
