-- extend re-arms a lock's expiry only if it still holds the caller's token.
-- It never creates the key: a lock that expired or was taken stays lost.
--
-- KEYS[1]  the lock name
-- ARGV[1]  the caller's token
-- ARGV[2]  the new time to live, in milliseconds
--
-- Returns 1 when the key held ARGV[1] and its expiry was set, 0 otherwise
-- (a key of another type is not the caller's), or an error reply when GET
-- failed otherwise. It reads the key as stored.lua's stored does, written
-- out: renewal runs it for every lock held, every third of a TTL, and
-- defining stored.lua's functions on each call cost a fifth of its time.
local v = redis.pcall("GET", KEYS[1])
if v == ARGV[1] then
	return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
if type(v) == "table" and v.err and string.sub(v.err, 1, 10) ~= "WRONGTYPE " then
	return v
end
return 0
