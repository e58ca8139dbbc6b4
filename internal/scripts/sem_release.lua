-- sem_release gives back the caller's permit of a counting semaphore, and
-- tells waiters that a permit is free.
--
-- KEYS[1]  the semaphore name (see semaphore.lua, which scripts.go puts in
--          front of this file, after stored.lua and announce.lua)
-- KEYS[2]  the permit count kept beside the name; may be absent (and then
--          so is KEYS[3])
-- KEYS[3]  the semaphore's queue of waiters; absent when there is none, or
--          ARGV[2] is ""
-- ARGV[1]  the caller's token
-- ARGV[2]  the channel to announce the release on; "" for none (the undo
--          of a failed attempt frees nothing anyone waits for)
--
-- The oldest waiter, popped from the queue, goes first, as for a lock (see
-- announce.lua).
--
-- Returns, when the caller held no live permit (it expired, or an earlier
-- try of this same release, resent by the client, dropped it), the node's
-- run id (see server in stored.lua), or 0 for a release that announces
-- nothing; an error reply when KEYS[1] holds something that is not a
-- semaphore. When the caller held a live permit, it is dropped and the
-- script returns 1 + announce(...): 1 + 2 × the clients the announcement
-- reached, + 1 when it named a waiter.
local expiry, t = permit(ARGV[1])
if type(expiry) == "table" then
	return expiry
end
if expiry then
	redis.call("ZREM", KEYS[1], ARGV[1])
	keep(t)
end
if not expiry or tonumber(expiry) <= t then
	if ARGV[2] ~= "" then
		return server()
	end
	return 0
end
local heard = 0
if ARGV[2] ~= "" then
	local waiter = ""
	if #KEYS > 2 then
		waiter = redis.call("ZPOPMIN", KEYS[3])[1] or ""
	end
	heard = announce(ARGV[2], ARGV[1], waiter)
end
return 1 + heard
