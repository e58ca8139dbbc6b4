-- release_reentrant drops one hold, or all of them, of the caller on a
-- reentrant lock. When no hold is left the key is deleted and waiters are
-- told that it is free.
--
-- KEYS[1]  the lock name
-- KEYS[2]  the lock's queue of waiters (see release.lua);
--          absent when there is none, or ARGV[3] is ""
-- ARGV[1]  the owner id
-- ARGV[2]  "1" to drop every hold, "0" to drop one, "2" to undo the hold a
--          failed acquisition took (drop one; delete the key when none is
--          left, publishing nothing)
-- ARGV[3]  the channel to publish on once deleted; "" for none
-- ARGV[4]  what to publish: an id unique to this release, so that waiters
--          can tell it from the copies other nodes publish of it (see
--          announce.lua, which scripts.go puts in front of this file)
-- ARGV[5]  optional, with KEYS[2]: the releaser's own member of the queue,
--          left by the wait that took the lock; removed first, so that
--          the release never names it (see release.lua's ARGV[4])
--
-- Dropping one hold ("0") never deletes the key: the count stays at 1 or
-- more, so a release that a client sends twice cannot free a lock its owner
-- still holds. Only the owner's last Unlock (ARGV[2] "1") deletes the key,
-- and the undo of a failed acquisition ("2"), which must free a lock whose
-- only hold it took.
--
-- Returns, when the key was absent (expired, or deleted by an earlier try
-- of this same release, resent by the client), the node's run id for the
-- owner's last Unlock (ARGV[2] "1"; see server in stored.lua) and 0
-- otherwise; when it held another owner's lock or another type, "taken:"
-- and the run id for the last Unlock, -1 otherwise (see server in stored.lua);
-- otherwise 1, plus, when the key was deleted and
-- announced, what announce returned: 2 × the clients the announcement
-- reached, + 1 when it named a waiter.
if #KEYS > 1 and ARGV[5] and ARGV[5] ~= "" then
	redis.pcall("ZREM", KEYS[2], ARGV[5])
end
local kind = redis.call("TYPE", KEYS[1]).ok
if kind == "none" then
	if ARGV[2] == "1" then
		return server()
	end
	return 0
end
if kind ~= "hash" or redis.call("HEXISTS", KEYS[1], ARGV[1]) == 0 then
	if ARGV[2] == "1" then
		return "taken:" .. server()
	end
	return -1
end
if ARGV[2] == "2" then
	if redis.call("HINCRBY", KEYS[1], ARGV[1], -1) < 1 then
		redis.call("DEL", KEYS[1])
	end
	return 1
end
if ARGV[2] ~= "1" then
	if redis.call("HINCRBY", KEYS[1], ARGV[1], -1) < 1 then
		redis.call("HSET", KEYS[1], ARGV[1], 1)
	end
	return 1
end
redis.call("DEL", KEYS[1])
local heard = 0
if ARGV[3] ~= "" then
	local waiter = next_waiter()
	heard = announce(ARGV[3], ARGV[4], waiter)
end
return 1 + heard
