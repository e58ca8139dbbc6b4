-- release deletes a lock only if it still holds the caller's token, and
-- tells waiters that it is free.
--
-- KEYS[1]  the lock name
-- ARGV[1]  the caller's token
-- ARGV[2]  the channel to publish the token on once deleted; "" for none
--          (the cleanup of a failed attempt frees nothing anyone waits for)
--
-- Returns 0 when the key was absent or held another value (expired, or
-- taken by someone else); otherwise the key held ARGV[1] and was deleted,
-- and it returns 1 plus the number of clients the announcement reached
-- (waiters: the releaser then lets them go first).
-- pcall: a key of another type (a reentrant lock) is "held by another".
if redis.pcall("GET", KEYS[1]) == ARGV[1] then
	redis.call("DEL", KEYS[1])
	local heard = 0
	if ARGV[2] ~= "" then
		heard = redis.call("PUBLISH", ARGV[2], ARGV[1])
	end
	return 1 + heard
end
return 0
