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
--          "0" for no check (see recovering in guard.lua, which scripts.go
--          puts in front of this file)
--
-- Returns {status, n[, holder]}:
--   { 1, counter}          granted: the key was absent and now holds ARGV[1],
--                          or it already held ARGV[1] (a command the client
--                          resent)
--   { 0, counter, holder}  the key is held by another value, holder
--   { 0, counter}          the key is a reentrant lock (a hash with an
--                          expiry)
--   an error reply         the key holds something that is not a lock (see
--                          alien in stored.lua), or GET failed
--   {-1, uptime}           refused: the node has been up only `uptime` seconds
-- counter is the fencing counter's value as stored ("0" when absent or not
-- fenced), read in the same step as the grant.
local up = recovering(ARGV[3])
if up then
	return {-1, up}
end
local n = counter()
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
	return {1, n}
end
return held(n)
