-- write_acquire takes the write lock of a reader-writer lock on this node:
-- as acquire.lua takes a plain lock, except that live readers refuse it and
-- the refused writer marks itself waiting, so that no new reader gets in
-- (see read_acquire.lua) until it holds the lock or its mark expires.
--
-- KEYS[1]  the lock name (see rw.lua, which scripts.go puts in front of
--          this file)
-- KEYS[2]  the key where a waiting writer marks itself: its id, for
--          ARGV[5] ms, re-armed at each refused attempt, and deleted by its
--          grant (or its release)
-- KEYS[3]  the name's fencing counter; absent when the lock is not fenced
-- ARGV[1]  the caller's token
-- ARGV[2]  the time to live, in milliseconds
-- ARGV[3]  the least uptime, in whole seconds, at which this node may grant;
--          "0" for no check (see recovering in guard.lua)
-- ARGV[4]  the writer's id: the same for all its attempts, unlike ARGV[1]
-- ARGV[5]  how long the mark lasts, in milliseconds: longer than the wait
--          between two attempts, so that it never lapses while the writer
--          still tries
--
-- Returns acquire.lua's replies: {1, counter} granted, {0, counter, holder}
-- held by another writer or a Mutex, {0, counter} held by readers (or a
-- reentrant Mutex), {-1, uptime} refused while the node recovers, or an
-- error reply when KEYS[1] holds what no lock leaves; a grant without
-- fencing (no KEYS[3]) is an integer, which costs the client less: the
-- node's time in Unix milliseconds, the clock evidence the vote carries
-- (see internal/node/clock.go), or 1 when the user may not run TIME.
local up = recovering(ARGV[3])
if up then
	return {-1, up}
end
local n = "0"
if #KEYS > 2 then
	n = redis.call("GET", KEYS[3]) or "0"
end
local state = readers(KEYS[1])
if type(state) == "table" then
	return state
end
if state == "none" then
	redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
	if redis.call("GET", KEYS[2]) == ARGV[4] then
		redis.call("DEL", KEYS[2])
	end
	if #KEYS < 3 then
		return node_time() or 1 -- see granted.lua
	end
	return {1, n}
end
if state == "readers" then
	local waiting = redis.call("GET", KEYS[2])
	if not waiting or waiting == ARGV[4] then
		redis.call("SET", KEYS[2], ARGV[4], "PX", ARGV[5])
	end
	return {0, n}
end
return held(n)
