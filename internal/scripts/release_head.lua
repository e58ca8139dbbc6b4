-- release_head.lua is not a script of its own: scripts.go puts it first in
-- release.lua's source, ahead of the functions the rest needs, so that a
-- release no one waits for runs this and nothing else (Lua makes a
-- closure of each local function a script defines, on every call, whether
-- it runs or not).
--
-- A plain lock's release (two keys) or an undo (ARGV[2] "") that finds the
-- caller's token, with no waiter queued on this node (the queue KEYS[2]
-- does not exist: ZADD made it, the last ZPOPMIN or ZREM deleted it), is a
-- compare-and-delete: it returns 1 (deleted, announced to no one). No one
-- queued means no one to name or hand the lock over to, and no
-- announcement to every waiter either: a waiter that is not queued here
-- (its queueing is on its way, or this node refused it) has not missed a
-- vote, only a wake; it tries again at the end of its back-off (see
-- redlock/internal/turn/turn.go). Everything else, waiters queued or not, goes on below.
if #KEYS < 3 and redis.pcall("GET", KEYS[1]) == ARGV[1] and
	(ARGV[2] == "" or #KEYS == 2 and redis.pcall("EXISTS", KEYS[2]) == 0) then
	redis.call("DEL", KEYS[1])
	return 1
end
