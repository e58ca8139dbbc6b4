-- acquire_multi takes several plain locks for one token at once: all of
-- them, or none. No node ever keeps part of a multi-name lock, so two of
-- them with names in common cannot hold each other's names on one node
-- and wait for the rest.
--
-- KEYS     the lock names (on a Redis Cluster node, all in one hash slot)
-- ARGV[1]  the caller's token
-- ARGV[2]  the time to live, in milliseconds
-- ARGV[3]  the least uptime, in whole seconds, at which this node may grant;
--          "0" for no check (see recovering in guard.lua, which scripts.go
--          puts in front of this file, with stored.lua)
--
-- Returns, as acquire_plain.lua does (an integer for a grant: go-redis
-- reads an array reply at a cost in allocations on every node):
--   1              granted: every key was absent, or held ARGV[1] (a
--                  command the client resent), and now holds ARGV[1] with
--                  the time to live
--   holder         a key is held by another value, holder; nothing set
--   0              a key is a reentrant lock; nothing set
--   an error reply a key holds something that is not a lock (see alien in
--                  stored.lua), or GET failed; nothing set
--   {-1, uptime}   refused: the node has been up only `uptime` seconds
--                  (as acquire.lua says it)
local up = recovering(ARGV[3])
if up then
	return {-1, up}
end
for _, key in ipairs(KEYS) do
	local v = stored(key)
	if type(v) == "table" then
		return v
	end
	if v == nil then
		return alien(key) or 0
	end
	if v and v ~= ARGV[1] then
		return v
	end
end
for _, key in ipairs(KEYS) do
	redis.call("SET", key, ARGV[1], "PX", ARGV[2])
end
return 1
