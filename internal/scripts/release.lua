-- release deletes a lock only if it still holds the caller's token.
--
-- KEYS[1]  the lock name
-- ARGV[1]  the caller's token
--
-- Returns 1 when the key held ARGV[1] and was deleted, 0 when the key was
-- absent or held another value (expired, or taken by someone else).
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("DEL", KEYS[1])
end
return 0
