-- extend re-arms a lock's expiry only if it still holds the caller's token.
-- It never creates the key: a lock that expired or was taken stays lost.
--
-- KEYS[1]  the lock name
-- ARGV[1]  the caller's token
-- ARGV[2]  the new time to live, in milliseconds
--
-- Returns 1 when the key held ARGV[1] and its expiry was set, 0 otherwise.
-- pcall: a key of another type (a reentrant lock) is "held by another".
if redis.pcall("GET", KEYS[1]) == ARGV[1] then
	return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0
