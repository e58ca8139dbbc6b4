-- release_reentrant drops one hold, or all of them, of the caller on a
-- reentrant lock. When no hold is left the key is deleted and waiters are
-- told that it is free.
--
-- KEYS[1]  the lock name
-- ARGV[1]  the owner id
-- ARGV[2]  "1" to drop every hold, "0" to drop one
-- ARGV[3]  the channel to publish on once deleted; "" for none
-- ARGV[4]  what to publish: an id unique to this release, so that waiters
--          can tell it from the copies other nodes publish of it
--
-- Returns 1 when the owner held the lock here (whatever is left), 0 when it
-- did not (expired, taken, or not a reentrant lock).
if redis.call("TYPE", KEYS[1]).ok ~= "hash" or redis.call("HEXISTS", KEYS[1], ARGV[1]) == 0 then
	return 0
end
local left = 0
if ARGV[2] ~= "1" then
	left = redis.call("HINCRBY", KEYS[1], ARGV[1], -1)
end
if left <= 0 then
	redis.call("DEL", KEYS[1])
	if ARGV[3] ~= "" then
		redis.call("PUBLISH", ARGV[3], ARGV[4])
	end
end
return 1
