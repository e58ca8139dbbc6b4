-- extend_reentrant re-arms a reentrant lock's expiry only if the caller
-- owns it. It never creates the key.
--
-- KEYS[1]  the lock name
-- ARGV[1]  the owner id
-- ARGV[2]  the new time to live, in milliseconds
--
-- Returns 1 when the owner held the lock and its expiry was set, 0 otherwise.
if redis.call("TYPE", KEYS[1]).ok == "hash" and redis.call("HEXISTS", KEYS[1], ARGV[1]) == 1 then
	return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0
