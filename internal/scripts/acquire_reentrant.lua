-- acquire_reentrant takes a reentrant lock, or one more hold on it when the
-- caller already owns it. The lock is a hash: one field, the owner, whose
-- value is the owner's hold count on this node.
--
-- KEYS[1]  the lock name
-- KEYS[2]  the name's fencing counter; absent when the lock is not fenced
-- ARGV[1]  the owner id
-- ARGV[2]  the time to live, in milliseconds
-- ARGV[3]  "1" when the caller already holds the lock (one more hold): then
--          an absent key is not created, since the lock was released or
--          lost meanwhile
-- ARGV[4]  the least uptime, in whole seconds, at which this node may grant;
--          "0" for no check (see acquire.lua)
--
-- Returns {holds, n}: holds is the owner's hold count after this call (1 or
-- more), or 0 when the key is held by another owner or is not a reentrant
-- lock, and n the fencing counter as stored ("0" when absent or not fenced);
-- or {-1, uptime} when the node has been up less than ARGV[4] seconds.
if ARGV[4] ~= "0" then
	local up = tonumber(string.match(redis.call("INFO", "server"), "uptime_in_seconds:(%d+)"))
	if up < tonumber(ARGV[4]) then
		return {-1, tostring(up)}
	end
end
local counter = "0"
if #KEYS > 1 then
	counter = redis.call("GET", KEYS[2]) or "0"
end
local kind = redis.call("TYPE", KEYS[1]).ok
if kind == "none" then
	if ARGV[3] == "1" then
		return {0, counter}
	end
	redis.call("HSET", KEYS[1], ARGV[1], 1)
	redis.call("PEXPIRE", KEYS[1], ARGV[2])
	return {1, counter}
end
if kind == "hash" and redis.call("HEXISTS", KEYS[1], ARGV[1]) == 1 then
	local holds = redis.call("HINCRBY", KEYS[1], ARGV[1], 1)
	redis.call("PEXPIRE", KEYS[1], ARGV[2])
	return {holds, counter}
end
return {0, counter}
