-- acquire takes a plain lock like SET NX PX, for the two cases that need
-- more than that command: a node must refuse while it may have forgotten
-- locks (it restarted recently), or the caller needs the name's fencing
-- counter from the same atomic step.
--
-- KEYS[1]  the lock name
-- KEYS[2]  the name's fencing counter; absent when the lock is not fenced
-- ARGV[1]  the caller's token
-- ARGV[2]  the time to live, in milliseconds
-- ARGV[3]  the least uptime, in whole seconds, at which this node may grant;
--          "0" for no check. A node restarted without persistence has lost
--          its locks: until the longest TTL in use has passed since it
--          started, a grant from it could help a second holder to a quorum.
--
-- Returns {status, n}:
--   { 1, counter}  granted: the key was absent and now holds ARGV[1], or it
--                  already held ARGV[1] (a command the client resent)
--   { 0, counter}  the key is held by another value (or another type)
--   {-1, uptime}   refused: the node has been up only `uptime` seconds
-- counter is the fencing counter's value as stored ("0" when absent or not
-- fenced), read in the same step as the grant.
if ARGV[3] ~= "0" then
	local up = tonumber(string.match(redis.call("INFO", "server"), "uptime_in_seconds:(%d+)"))
	if up < tonumber(ARGV[3]) then
		return {-1, tostring(up)}
	end
end
local counter = "0"
if #KEYS > 1 then
	counter = redis.call("GET", KEYS[2]) or "0"
end
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) or redis.pcall("GET", KEYS[1]) == ARGV[1] then
	return {1, counter}
end
return {0, counter}
