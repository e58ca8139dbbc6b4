-- inspect reads what one node holds for a lock, changing nothing: the
-- operator's view of a lock (Redlock.Inspect, `redlock status`).
--
-- KEYS[1]  the lock name
-- KEYS[2]  the name's fencing counter; absent when the node cannot keep it
--          beside the name (a cluster node, a name with braces but no tag)
--
-- Returns {kind, pttl, holder, holds, counter}:
--   kind     "none" (free), "string" (a plain lock), "hash" (a reentrant lock)
--   pttl     the key's remaining time to live in milliseconds (0 when free)
--   holder   a plain lock's token, a reentrant lock's owner id ("" when free)
--   holds    the owner's hold count (1 for a plain lock, 0 when free)
--   counter  the fencing counter as stored ("0" when absent)
-- or an error reply when KEYS[1] holds something that is not a lock (see
-- alien in stored.lua, which scripts.go puts in front of this file).
local counter = "0"
if #KEYS > 1 then
	counter = redis.call("GET", KEYS[2]) or "0"
end
local bad = alien(KEYS[1])
if bad then
	return bad
end
local kind = redis.call("TYPE", KEYS[1]).ok
if kind == "none" then
	return {"none", 0, "", 0, counter}
end
local pttl = redis.call("PTTL", KEYS[1])
if kind == "string" then
	return {kind, pttl, redis.call("GET", KEYS[1]), 1, counter}
end
local fields = redis.call("HGETALL", KEYS[1])
return {kind, pttl, fields[1] or "", tonumber(fields[2]) or 0, counter}
