-- announce.lua is not a script of its own: scripts.go puts it in front of
-- release.lua, release_reentrant.lua and force_release.lua.

-- publish is PUBLISH, except that a PUBLISH the node refuses (an ACL user
-- without channel permissions: Redis 7 gives new users none) reaches no
-- one instead of failing the release: the release stands, and waiters find
-- the lock free when their back-off ends.
local function publish(channel, message)
	local n = redis.pcall("PUBLISH", channel, message)
	if type(n) == "table" then
		return 0
	end
	return n
end

-- announce tells waiters that the lock KEYS[1] is free, and returns 2 × the
-- number of clients that heard it, plus 1 when it named a waiter. waiter is
-- the oldest waiter, popped from the lock's queue (a sorted set of waiter
-- ids, scored by when each started waiting), "" when there is none. A
-- waiter's id is "process/waiter": the release is announced on that
-- process's own channel, "redlock:wake:process", as "id|waiter|name", so
-- that only the process whose turn it is wakes. With no waiter queued, or
-- when the turn is a reader's ("process/r-..."; readers do not exclude one
-- another, so all of them may go), it is announced to every process
-- waiting on the lock's channel, as "id|".
local function announce(channel, id, waiter)
	if waiter ~= "" and not string.find(waiter, "/r-", 1, true) then
		local process = string.match(waiter, "^([^/]*)/")
		if process then
			return 2 * publish("redlock:wake:" .. process, id .. "|" .. waiter .. "|" .. KEYS[1]) + 1
		end
	end
	return 2 * publish(channel, id .. "|")
end

-- next_waiter pops the oldest waiter from the lock's queue KEYS[2], and
-- returns "" when there is no queue (no KEYS[2]) or none is queued. A pop
-- the node refuses (an ACL user without ZPOPMIN, or without the queue's
-- key) pops no one: the release stands, and is announced to every waiter.
local function next_waiter()
	if #KEYS < 2 then
		return ""
	end
	local popped = redis.pcall("ZPOPMIN", KEYS[2])
	if type(popped) ~= "table" or popped.err then
		return ""
	end
	return popped[1] or ""
end
