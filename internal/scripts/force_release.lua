-- force_release deletes a lock whoever holds it, and tells waiters that it
-- is free: the operator's way out of a stuck lock (Redlock.ForceUnlock,
-- `redlock unlock --force`). It never touches the name's fencing counter,
-- so the next holder's token is still greater than every earlier one.
--
-- KEYS[1]  the lock name
-- KEYS[2]  the lock's queue of waiters (see release.lua); absent when the
--          node cannot keep it beside the name
-- ARGV[1]  the channel to announce the release on
-- ARGV[2]  the announcement's id for a reentrant lock, unique to this
--          release; a plain lock's release is announced with its token, as
--          its holder's own release would be (see announce.lua, which
--          scripts.go puts in front of this file)
--
-- Returns {0, "", "none"} when the key was absent; {1 + announce(...),
-- holder, kind} when it held a lock, now deleted: announce returned 2 × the
-- clients that heard it, + 1 when it named a waiter; holder is the plain
-- lock's (or writer's) token, the reentrant lock's owner id, or the token
-- of one of the holders of a semaphore or of a reader-writer lock's
-- readers; kind "string", "hash" (a reentrant lock), "zset" (a semaphore)
-- or "readers". A semaphore's
-- permit count, kept beside it, expires with the permits it counted.
-- An error reply, deleting nothing, when KEYS[1] holds something that is
-- not a lock (see alien in stored.lua) nor a semaphore.
local kind = redis.call("TYPE", KEYS[1]).ok
if kind == "none" then
	return {0, "", "none"}
end
if kind ~= "zset" or redis.call("PTTL", KEYS[1]) == -1 then
	local bad = alien(KEYS[1])
	if bad then
		return bad
	end
end
local holder, id = "", ARGV[2]
if kind == "string" then
	holder = redis.call("GET", KEYS[1])
	id = holder
elseif kind == "zset" then
	holder = redis.call("ZRANGE", KEYS[1], 0, 0)[1] or ""
else
	for _, field in ipairs(redis.call("HKEYS", KEYS[1])) do
		if field == "redlock:readers" then -- a reader-writer lock's marker (see rw.lua)
			kind = "readers"
		elseif holder == "" then
			holder = field
		end
	end
end
redis.call("DEL", KEYS[1])
local waiter = next_waiter()
return {1 + announce(ARGV[1], id, waiter), holder, kind}
