-- release deletes a lock only if it still holds the caller's token, and
-- tells waiters that it is free.
--
-- KEYS[1]  the lock name
-- KEYS[2]  the lock's queue of waiters: a sorted set of waiter ids, scored
--          by when each started waiting; absent when there is none, or
--          ARGV[2] is ""
-- ARGV[1]  the caller's token
-- ARGV[2]  the channel to announce the release on once deleted; "" for none
--          (the cleanup of a failed attempt frees nothing anyone waits for)
-- KEYS[3], ARGV[3]  for a reader-writer lock's writer only (then KEYS[2] is
--          given too): where its waiting mark is kept, and its id; the mark
--          is deleted if it is still this writer's, whatever KEYS[1] holds
--          (ARGV[3] is "" for a plain lock that gives ARGV[4])
-- ARGV[4]  with KEYS[2], optional: the releaser's own member of the queue,
--          left there by the wait that took the lock (its removal is sent in
--          the background, and may not have reached this node yet): it is
--          removed first, so that the release neither hands the lock back
--          to a wait that has ended nor names it
-- ARGV[5]  with ARGV[4], optional: that member's score, which spares its
--          removal when the oldest waiter came after it (release_head.lua)
--
-- A release no one waits for ends in release_head.lua, which scripts.go
-- puts in front of this file: a compare-and-delete, announced to no one.
-- Otherwise the oldest waiter, popped from the queue, goes first: the release is
-- announced to its process only (see announce.lua, which scripts.go puts in
-- front of this file); the other waiters keep waiting. With no one popped
-- (a writer's release, a queue kept nowhere, a user refused ZPOPMIN),
-- every waiter may try. A plain lock's release (two keys) hands the
-- lock over to a waiter that takes it so (see hand_over): the key holds
-- the waiter's token from the same atomic step on, and no one can take it
-- in between.
--
-- Returns, when the key was absent (it expired, or an earlier try of this
-- same release, resent by the client, deleted it), the node's run id (see
-- server in stored.lua), or 0 for a release that announces nothing (an
-- undo, whose outcome no one reads); when it held another value or type
-- (taken by someone else), "taken:" and the run id (see server in
-- stored.lua), or -1 for an undo; an error reply when GET failed otherwise.
-- When the key held ARGV[1] it was deleted, and the script returns
-- 1 + announce(...): 1 + 2 × the clients the announcement reached, + 1 when
-- it named a waiter (the releaser then lets it go first).

-- taker returns what hands the lock over to waiter: the channel of its
-- process, its TTL and its token, when waiter is a member
-- "process/h-<ttl ms>-<token>" (a waiter that takes the lock handed over)
-- and its process subscribes on this server; nil otherwise.
--
-- The waiter counts the handoff's announcement as this node's vote (see
-- redlock/internal/turn/turn.go), so the announcement must come only from the step that
-- set the key to its token. Whether the process listens is asked before
-- the key is set, of this server alone (PUBSUB NUMSUB): a PUBLISH count
-- cannot decide it after the fact, since on a Redis Cluster it counts the
-- subscribers of one master while the message reaches every master's. A
-- user refused PUBSUB hands nothing over.
local function taker(waiter)
	local process, ttl, token = string.match(waiter, "^([^/]+)/h%-(%d+)%-(.+)$")
	if not process then
		return nil
	end
	local channel = "redlock:wake:" .. process
	local n = redis.pcall("PUBSUB", "NUMSUB", channel)
	if type(n) ~= "table" or n.err or tonumber(n[2]) == 0 then
		return nil
	end
	return channel, ttl, token
end

-- hand_over hands the lock KEYS[1], free on this node, to waiter when
-- taker says it takes it so: the key holds the waiter's token for its TTL
-- from this atomic step on, and no one can take it in between; then it
-- tells the waiter's process, on its own channel, as
-- "id|waiter#h<node time ms>|name" (id: the releaser's token). It returns
-- 2 × the clients told + 1 once handed; 0 when it handed nothing (the
-- waiter is then to be named as any other: its process is gone, or listens
-- on another server of a Cluster or a Ring, and makes its own attempt).
local function hand_over(id, waiter)
	local channel, ttl, token = taker(waiter)
	if not channel then
		return 0
	end
	local now = node_time() or 0 -- see granted.lua
	redis.call("SET", KEYS[1], token, "PX", ttl)
	return 2 * publish(channel, id .. "|" .. waiter .. "#h" .. now .. "|" .. KEYS[1]) + 1
end

if removed == nil and #KEYS > 1 and ARGV[4] and ARGV[4] ~= "" then
	redis.pcall("ZREM", KEYS[2], ARGV[4]) -- unless release_head.lua did
end
if #KEYS > 2 and redis.call("GET", KEYS[3]) == ARGV[3] then
	-- A reader-writer lock's writer drops its waiting mark (see
	-- write_acquire.lua) on every node, also where its grant did not land.
	redis.call("DEL", KEYS[3])
end
local v = got -- read by release_head.lua, as stored reads it
if v == nil then
	v = stored(KEYS[1])
elseif type(v) == "table" and v.err and string.sub(v.err, 1, 10) == "WRONGTYPE " then
	v = nil
end
if type(v) == "table" then
	return v
end
if v == ARGV[1] then
	if ARGV[2] == "" then
		redis.call("DEL", KEYS[1])
		return 1
	end
	local waiter = popped or next_waiter()
	local heard = 0
	if #KEYS == 2 then
		heard = hand_over(ARGV[1], waiter) -- its SET replaces the token
	end
	if heard == 0 then
		redis.call("DEL", KEYS[1])
		heard = announce(ARGV[2], ARGV[1], waiter)
	end
	return 1 + heard
end
if v == false then
	if ARGV[2] ~= "" then
		if #KEYS == 2 then
			-- Not held here (the key expired, or this node missed the
			-- handoff that gave the caller the lock): the lock is free on
			-- this node, and a waiter that takes it handed over gets it, so
			-- that a node left out of one handoff is not left out of every
			-- later one. Any other waiter is left to its turn.
			local head = redis.pcall("ZRANGE", KEYS[2], 0, 0)
			if type(head) == "table" and head[1] and taker(head[1]) then
				hand_over(ARGV[1], next_waiter())
			end
		end
		return server()
	end
	return 0
end
if ARGV[2] ~= "" then
	return "taken:" .. server()
end
return -1
