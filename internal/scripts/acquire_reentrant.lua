-- acquire_reentrant takes a reentrant lock, or one more hold on it when the
-- caller already owns it. The lock is a hash: one field, the owner, whose
-- value is the owner's hold count on this node.
--
-- KEYS[1]  the lock name
-- ARGV[1]  the owner id
-- ARGV[2]  the time to live, in milliseconds
-- ARGV[3]  "1" when the caller already holds the lock (one more hold): then
--          an absent key is not created, since the lock was released or
--          lost meanwhile
--
-- Returns the owner's hold count after this call (1 or more), or 0 when the
-- key is held by another owner or is not a reentrant lock.
local kind = redis.call("TYPE", KEYS[1]).ok
if kind == "none" then
	if ARGV[3] == "1" then
		return 0
	end
	redis.call("HSET", KEYS[1], ARGV[1], 1)
	redis.call("PEXPIRE", KEYS[1], ARGV[2])
	return 1
end
if kind == "hash" and redis.call("HEXISTS", KEYS[1], ARGV[1]) == 1 then
	local holds = redis.call("HINCRBY", KEYS[1], ARGV[1], 1)
	redis.call("PEXPIRE", KEYS[1], ARGV[2])
	return holds
end
return 0
