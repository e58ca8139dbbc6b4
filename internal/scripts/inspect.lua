-- inspect reads what one node holds for a lock or a semaphore, changing
-- nothing: the operator's view of a name (Redlock.Inspect, `redlock status`).
--
-- KEYS[1]  the name
-- KEYS[2]  the name's fencing counter; absent when the node cannot keep it
--          beside the name (a cluster node, a name with braces but no tag)
-- KEYS[3]  a semaphore's permit count; absent exactly when KEYS[2] is
--
-- Returns {kind, pttl, holder, holds, counter[, permits, token, ttl, ...]}:
--   kind     "none" (free), "string" (a plain lock, or a reader-writer
--            lock's writer), "hash" (a reentrant lock), "zset" (a
--            semaphore), "readers" (a reader-writer lock's readers)
--   pttl     the key's remaining time to live in milliseconds (0 when free)
--   holder   a plain lock's token, a reentrant lock's owner id ("" when free
--            or a semaphore)
--   holds    the owner's hold count (1 for a plain lock, 0 when free or a
--            semaphore)
--   counter  the fencing counter as stored ("0" when absent)
-- and, for a semaphore and for readers only:
--   permits  the permit count as stored ("0" when absent; always "0" for
--            readers)
--   token, ttl  one pair per live permit (per live reader), the semaphore's
--            soonest to expire first: the holder's token and the
--            milliseconds its permit has left by this node's clock
-- or an error reply when KEYS[1] holds something that is neither (see
-- alien in stored.lua, which scripts.go puts in front of this file).
--
-- A new kind adds a kind here and its own trailing values; the first five
-- stay as they are.
local counter = "0"
if #KEYS > 1 then
	counter = redis.call("GET", KEYS[2]) or "0"
end
local kind = redis.call("TYPE", KEYS[1]).ok
if kind == "zset" then
	-- A semaphore: a sorted set of tokens scored by expiry in this node's
	-- Unix milliseconds, with an expiry of its own (see semaphore.lua).
	local pttl = redis.call("PTTL", KEYS[1])
	if pttl ~= -1 then
		local permits = "0"
		if #KEYS > 2 then
			permits = redis.call("GET", KEYS[3]) or "0"
		end
		local t = now()
		local out = {kind, pttl, "", 0, counter, permits}
		local live = redis.call("ZRANGEBYSCORE", KEYS[1], "(" .. t, "+inf", "WITHSCORES")
		for i = 1, #live, 2 do
			out[#out + 1] = live[i]
			out[#out + 1] = tonumber(live[i + 1]) - t
		end
		return out
	end
end
if kind == "hash" and redis.call("HEXISTS", KEYS[1], "redlock:readers") == 1 then
	-- A reader-writer lock's readers: each reader's token and its expiry
	-- in this node's Unix milliseconds, beside a marker (see rw.lua).
	local t = now()
	local out = {"readers", redis.call("PTTL", KEYS[1]), "", 0, counter, "0"}
	local all = redis.call("HGETALL", KEYS[1])
	for i = 1, #all, 2 do
		if all[i] ~= "redlock:readers" and tonumber(all[i + 1]) > t then
			out[#out + 1] = all[i]
			out[#out + 1] = tonumber(all[i + 1]) - t
		end
	end
	return out
end
local bad = alien(KEYS[1])
if bad then
	return bad
end
if kind == "none" then
	return {"none", 0, "", 0, counter}
end
local pttl = redis.call("PTTL", KEYS[1])
if kind == "string" then
	return {kind, pttl, redis.call("GET", KEYS[1]), 1, counter}
end
local fields = redis.call("HGETALL", KEYS[1])
return {kind, pttl, fields[1] or "", tonumber(fields[2]) or 0, counter}
